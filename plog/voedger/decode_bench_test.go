package voedger_test

import (
	"testing"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog/voedger"
)

// BenchmarkDecode decodes every golden event once per op.
func BenchmarkDecode(b *testing.B) {
	g := golden(b)
	type row struct {
		part isequencer.PartitionID
		off  isequencer.PLogOffset
		v    []byte
	}
	var rows []row
	for _, e := range g.Events {
		_, _, v := e.Bytes()
		rows = append(rows, row{isequencer.PartitionID(e.Partition), isequencer.PLogOffset(e.Offset), v})
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range rows {
			_, _ = voedger.Decode(r.part, r.off, r.v)
		}
	}
	b.ReportMetric(float64(len(rows)), "events/op")
}
