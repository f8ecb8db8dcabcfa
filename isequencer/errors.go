package isequencer

import "errors"

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
