package galloc

import (
	"errors"
	"fmt"

	"github.com/cqlseq/cqlseq/storage"
)

// Sentinel errors; compare with errors.Is.
var (
	// ErrInvalidOptions: Options.Validate found a bad field (a chunk size of
	// 0, an unknown type, ...). It wraps storage.ErrInvalidArgument.
	ErrInvalidOptions = fmt.Errorf("galloc: invalid options: %w", storage.ErrInvalidArgument)

	// ErrStartOutOfRange: Options.Start lies outside the type's values
	// (for example past its maximum). Validate reports it together with
	// ErrInvalidOptions.
	ErrStartOutOfRange = errors.New("start outside the type's range")

	// ErrInvalidName: a sequence name that is empty, too long or not
	// valid UTF-8. It wraps storage.ErrInvalidArgument.
	ErrInvalidName = fmt.Errorf("galloc: invalid sequence name: %w", storage.ErrInvalidArgument)

	// ErrDefinitionMismatch: the stored sequence has another type, chunk
	// size, start or step than the Options given to Open.
	ErrDefinitionMismatch = errors.New("galloc: stored sequence definition differs from the options")

	// ErrExhausted: every value of the sequence has been allocated.
	ErrExhausted = errors.New("galloc: sequence exhausted")

	// ErrRetired: the sequence was retired (Alter with Change.Retire): it
	// hands out no more values, and its name cannot be created again.
	ErrRetired = errors.New("galloc: sequence retired")

	// ErrContention: a chunk allocation lost its compare-and-swap
	// Options.MaxAttempts times in a row.
	ErrContention = errors.New("galloc: chunk allocation lost every attempt to concurrent allocations")

	// ErrClosed: the Sequence was closed.
	ErrClosed = errors.New("galloc: sequence closed")

	// ErrCorrupt: a stored allocation record does not decode.
	ErrCorrupt = errors.New("galloc: corrupt allocation record")
)
