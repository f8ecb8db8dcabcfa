package plogcheck

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
)

func TestRestored(t *testing.T) {
	ack := func(line int, part uint16, off uint64, ws uint64, nums ...uint64) Ack {
		a := Ack{Line: line, Partition: isequencer.PartitionID(part), Offset: isequencer.PLogOffset(off), WSID: isequencer.WSID(ws)}
		for i, n := range nums {
			a.Numbers = append(a.Numbers, plog.SeqNumber{SeqID: isequencer.SeqID(i + 1), Number: isequencer.Number(n)})
		}
		return a
	}
	lost := []Ack{ack(1, 0, 10, 1, 5, 100), ack(2, 0, 11, 2, 3, 50), ack(3, 1, 7, 1, 6, 101)}

	f := Restored(lost, []Ack{ack(1, 0, 1000, 1, 7, 200), ack(2, 1, 500, 2, 4, 51), ack(3, 2, 1, 1, 8, 300)})
	assert.True(t, f.OK(), "%+v", f.Listed)

	f = Restored(lost, []Ack{
		ack(1, 0, 11, 3, 1, 1),    // offset acknowledged again
		ack(2, 0, 9, 3, 2, 2),     // offset below one acknowledged before
		ack(3, 0, 2000, 1, 6, 90), // number 6 again; 90 below 101
		ack(4, 1, 900, 2, 4, 20),  // 20 below 50
	})
	assert.Equal(t, uint64(5), f.Problems, "%+v", f.Listed)
	assert.Equal(t, uint64(2), f.ByKind[Duplicate])
	assert.Equal(t, uint64(3), f.ByKind[Regression])
}
