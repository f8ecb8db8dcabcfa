package timeshard

import (
	"errors"
	"fmt"

	"github.com/cqlseq/cqlseq/storage"
)

// Sentinel errors; compare with errors.Is.
var (
	// ErrInvalidLayout: the bit split does not add up to the layout's Bits
	// (63 by default) or a field is out of bounds. It wraps storage.ErrInvalidArgument.
	ErrInvalidLayout = fmt.Errorf("timeshard: invalid layout: %w", storage.ErrInvalidArgument)

	// ErrInvalidOptions: another Options field is bad. It wraps
	// storage.ErrInvalidArgument.
	ErrInvalidOptions = fmt.Errorf("timeshard: invalid options: %w", storage.ErrInvalidArgument)

	// ErrClockBackwards: the clock went back by more than
	// Options.MaxBackwards behind the last ID's time.
	ErrClockBackwards = errors.New("timeshard: clock moved backwards beyond the bound")

	// ErrTimeRange: the clock is before the layout's epoch or past the
	// time field's end.
	ErrTimeRange = errors.New("timeshard: clock outside the layout's time range")

	// ErrNoNode: every node ID is leased by another process.
	ErrNoNode = errors.New("timeshard: no free node ID")

	// ErrLeaseLost: the node ID's lease was lost (or its local deadline
	// passed); the generator makes no more IDs.
	ErrLeaseLost = errors.New("timeshard: node lease lost")

	// ErrLayoutChange: the generator name's IDs were made in another
	// layout, and the new one's could repeat them or sort before them
	// (CheckLayoutChange).
	ErrLayoutChange = errors.New("timeshard: layout change refused")

	// ErrClosed: the generator was closed.
	ErrClosed = errors.New("timeshard: generator closed")
)
