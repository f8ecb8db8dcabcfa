package plog

import (
	"errors"
	"fmt"
)

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

	// ErrRecordConflict wraps ErrConflict for a trust-0 event whose
	// records were refused (a record ID already stored): the event itself
	// is stored, without those records. Test for it before ErrConflict
	// when the event's fate matters.
	ErrRecordConflict = fmt.Errorf("%w: a record ID is already stored (the event is stored)", ErrConflict)

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

	// ErrOffsetTaken: a Writer of trust level 0 or 1 was given a group of
	// one void gap marker (Event.Void: a claim of its offset) and found an
	// event already stored at its offset. Nothing was written and the
	// writer is not stopped: the caller re-reads the PLog (the event is
	// there now) and goes on after it.
	ErrOffsetTaken = errors.New("plog: offset taken: the claim found an event stored there")

	// ErrNotWritten: a GroupWriter did not send an event of a group,
	// because an event before it failed first (see GroupWriter). The
	// event is not stored by that call.
	ErrNotWritten = errors.New("plog: not written")

	// ErrInvalidOptions wraps every problem NewWriter or NewReader finds in
	// its options.
	ErrInvalidOptions = errors.New("plog: invalid options")
)
