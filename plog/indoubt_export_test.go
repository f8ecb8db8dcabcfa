package plog

// The bounds of a FencedWriter's in-doubt encodings, for the tests of
// package plog_test.
const (
	MaxInDoubtPerOffset = maxInDoubtPerOffset
	MaxInDoubt          = maxInDoubt
)
