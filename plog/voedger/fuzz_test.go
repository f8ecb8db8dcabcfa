package voedger_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog/voedger"
)

// FuzzDecode: Decode of any bytes either fails with an error that wraps
// ErrCorrupt or ErrUnsupportedCodec, or gives an event of a non-zero WSID
// at the given key; an accepted value is rejected without its last byte
// (every field has a known length). It never panics. Seeds: the golden
// rows.
func FuzzDecode(f *testing.F) {
	g := golden(f)
	for _, e := range g.Events {
		_, _, v := e.Bytes()
		f.Add(e.Partition, e.Offset, v)
	}
	f.Fuzz(func(t *testing.T, part uint16, off uint64, b []byte) {
		e, err := voedger.Decode(voedgerPart(part), voedgerOff(off), b)
		if err != nil {
			require.True(t, errorsIsAny(err, voedger.ErrCorrupt, voedger.ErrUnsupportedCodec), "%v", err)
			return
		}
		require.NotZero(t, e.WSID)
		require.Equal(t, voedgerOff(off), e.Offset)
		_, err = voedger.Decode(voedgerPart(part), voedgerOff(off), b[:len(b)-1])
		require.Error(t, err)
	})
}

func voedgerPart(p uint16) isequencer.PartitionID { return isequencer.PartitionID(p) }
func voedgerOff(o uint64) isequencer.PLogOffset   { return isequencer.PLogOffset(o) }

func errorsIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
