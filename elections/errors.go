package elections

import (
	"errors"
	"fmt"

	"github.com/cqlseq/cqlseq/storage"
)

// Sentinel errors; compare with errors.Is.
var (
	// ErrTaken: another holder has the leadership.
	ErrTaken = errors.New("elections: leadership held by another")

	// ErrHeld: this Elections already holds (or is acquiring) the key.
	ErrHeld = errors.New("elections: leadership already held here")

	// ErrLost is the cause (context.Cause) of a leadership context cancelled
	// because the leadership was lost: the lease was not renewed before its
	// local deadline, or the stored lease is no longer this holder's.
	ErrLost = errors.New("elections: leadership lost")

	// ErrReleased is the cause of a leadership context cancelled by
	// ReleaseLeadership, Release or Cleanup.
	ErrReleased = errors.New("elections: leadership released")

	// ErrAbandoned is the cause of a leadership context cancelled by
	// Abandon: the lease is left to expire by its TTL.
	ErrAbandoned = errors.New("elections: leadership abandoned to expire")

	// ErrClosed: Cleanup has been called. It wraps storage.ErrClosed.
	ErrClosed = fmt.Errorf("elections: cleaned up: %w", storage.ErrClosed)

	// ErrCorrupt: a stored lease or epoch row does not decode.
	ErrCorrupt = errors.New("elections: corrupt row")
)
