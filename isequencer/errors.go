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

	// ErrInvalidParams wraps every problem New finds in Params.
	ErrInvalidParams = errors.New("isequencer: invalid params")
)
