package isequencer

import (
	"errors"
	"fmt"
)

var (
	// ErrUnknownSeqID is returned by Next for a SeqID that Params.SeqTypes
	// does not define for the current workspace's kind (or for an unknown
	// kind).
	ErrUnknownSeqID = errors.New("isequencer: unknown SeqID")

	// ErrNumberOverflow is returned by Next when the sequence has issued the
	// largest Number; it never wraps.
	ErrNumberOverflow = errors.New("isequencer: number overflow")

	// ErrReadNumbers wraps the storage error of a Next that could not read
	// the workspace's stored numbers. Next took no number; the transaction
	// can be cancelled (ISequencer.Cancel) and the command retried.
	ErrReadNumbers = errors.New("isequencer: reading stored numbers failed")

	// ErrInvalidParams wraps every problem New finds in Params.
	ErrInvalidParams = errors.New("isequencer: invalid params")
)

// PartialWriteError is an ISeqStorage.WriteValuesAndNextPLogOffset failure
// that says what was written: every value of the call's batch whose index
// is not in Failed is durable, the values at the Failed indexes may not
// be, and the next PLog offset was not written. Failed empty means that
// only the offset write failed. The sequencer retries the call with the
// Failed values only (and the same offset), so a flush over many
// workspaces gets through a store that fails writes one partition at a
// time. Reporting a written value as failed is harmless (it is written
// again); the reverse would lose it.
type PartialWriteError struct {
	// Failed are indexes into the call's batch, ascending, without repeats.
	Failed []int
	// Err is the cause.
	Err error
}

func (e *PartialWriteError) Error() string {
	return fmt.Sprintf("isequencer: partial write: %d values and the next PLog offset not written: %v", len(e.Failed), e.Err)
}

func (e *PartialWriteError) Unwrap() error { return e.Err }

// failedOnly keeps, in place, the values of batch at the indexes that pe
// reports failed. It returns batch unchanged and false if the indexes are
// not ascending, unique and in range (the whole batch is written again).
func (e *PartialWriteError) failedOnly(batch []SeqValue) ([]SeqValue, bool) {
	prev := -1
	for _, i := range e.Failed {
		if i <= prev || i >= len(batch) {
			return batch, false
		}
		prev = i
	}
	for j, i := range e.Failed {
		batch[j] = batch[i] // j <= i: nothing unread is overwritten
	}
	return batch[:len(e.Failed)], true
}
