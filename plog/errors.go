package plog

import "errors"

var (
	// ErrCorrupt: stored event bytes could not be decoded. Errors wrapping
	// it name the partition and the offset.
	ErrCorrupt = errors.New("plog: corrupt event")

	// ErrConflict: an insert-if-not-exists write (trust level 0 or 1) found
	// an event or a record already stored under its key. Nothing was
	// overwritten; the Writer is stopped and refuses every later write,
	// because a conflict means the sequences handed out a number twice and
	// an operator must look before the partition goes on.
	ErrConflict = errors.New("plog: conflict")

	// ErrFenced: the fence of a PLog block holds another owner's epoch
	// (FencedWriter, Sweep): a takeover has deposed this owner. Nothing
	// was written by the refused call; a FencedWriter is stopped and
	// refuses every later write.
	ErrFenced = errors.New("plog: fenced: another owner holds the partition")

	// ErrOwnEventStored: a FencedWriter found, at offsets it was writing,
	// events byte for byte equal to ones it wrote earlier in a batch whose
	// outcome was unknown, in a block fenced with its own epoch: that
	// batch was applied after all (a Paxos proposal accepted before a
	// crash, completed by a later round). Nothing was written and the
	// writer is not stopped: the caller re-reads the PLog (the events are
	// there now) and goes on after them.
	ErrOwnEventStored = errors.New("plog: an earlier write of this writer, whose outcome was unknown, is stored")

	// ErrNotWritten: a GroupWriter did not send an event of a group,
	// because an event before it failed first (see GroupWriter). The
	// event is not stored by that call.
	ErrNotWritten = errors.New("plog: not written")

	// ErrInvalidOptions wraps every problem NewWriter or NewReader finds in
	// its options.
	ErrInvalidOptions = errors.New("plog: invalid options")
)
