package apppart

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// actualizations is an isequencer.Metrics that counts completed
// actualizations.
type actualizations struct{ n atomic.Int64 }

func (a *actualizations) Actualized(int, time.Duration) { a.n.Add(1) }
func (*actualizations) Transaction()                    {}
func (*actualizations) Busy(isequencer.BusyReason)      {}
func (*actualizations) Unflushed(int)                   {}
func (*actualizations) Flushed(int, time.Duration)      {}
func (*actualizations) StorageError(string)             {}

// TestNumbersReadFailureDoesNotActualize: a command whose first Next fails
// to read its workspace's numbers took nothing. It fails with the storage
// error, the partition does not actualize (an actualization would read the
// PLog again from the stored offset, and Do would be busy meanwhile), its
// offset is not used up, and the next command in the workspace reads the
// numbers again and gets the first ones.
func TestNumbersReadFailureDoesNotActualize(t *testing.T) {
	inner := mem.New(mem.Options{})
	defer inner.Close()
	st, err := faulty.New(inner, faulty.Options{})
	require.NoError(t, err)
	m := &actualizations{}
	p := open(t, OpenOptions{
		Storage: st, App: testApp, Partition: testPart,
		SeqTypes:  map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number{kind: {seqRec: 100, seqLog: 1}},
		Sequencer: isequencer.Params{RetryDelay: time.Millisecond, Metrics: m},
		Logger:    quiet(),
	})
	cmd := func(ws isequencer.WSID) Command {
		return Command{WSKind: kind, WSID: ws, Seqs: []isequencer.SeqID{seqRec, seqLog}, Payload: []byte("x")}
	}
	r1, err := do(t, p, cmd(1))
	require.NoError(t, err)
	require.EqualValues(t, 1, m.n.Load(), "Open's actualization (reported before the first command can start)")

	// WSID 2 is not cached: the command reads its numbers ahead
	// (a Read of the workspace's partition), which fails and is
	// dropped, then its first Next reads them, which fails too.
	require.NoError(t, st.SetRules(faulty.Rule{Ops: []string{faulty.OpRead}, Action: faulty.Fail, Times: 2}))
	_, err = p.Do(context.Background(), cmd(2))
	require.ErrorIs(t, err, storage.ErrUnavailable)
	require.ErrorIs(t, err, isequencer.ErrReadNumbers)
	assert.Contains(t, err.Error(), "WSID 2")
	require.EqualValues(t, 2, st.InjectedOn(faulty.OpRead))

	r2, err := do(t, p, cmd(2))
	require.NoError(t, err, "the next command reads the numbers again")
	assert.Equal(t, r1.Offset+1, r2.Offset, "the failed command used up no offset")
	assert.Equal(t, []isequencer.Number{100, 1}, r2.Numbers, "and no number")
	assert.EqualValues(t, 1, m.n.Load(), "no actualization after a failed numbers read")
	_, ok := readEvent(t, inner, r1.Offset+2)
	assert.False(t, ok, "no event past the last command's")
}
