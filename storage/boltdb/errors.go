package boltdb

import (
	"errors"
	"fmt"

	"github.com/cqlseq/cqlseq/storage"
)

var (
	// ErrInvalidOptions wraps every problem Open finds in its arguments. It
	// wraps storage.ErrInvalidArgument.
	ErrInvalidOptions = fmt.Errorf("boltdb: invalid options: %w", storage.ErrInvalidArgument)

	// ErrIncompatible: the file is a bbolt file but not one of this package's
	// layout version (another application's file, or a newer layout), or,
	// opened read-only, a file this package never initialised (empty, or
	// without its buckets).
	ErrIncompatible = errors.New("boltdb: incompatible file layout")

	// ErrCorruptFile: Open found the file's bbolt structure broken (a
	// truncated file, a page id, count or offset outside the file, no
	// valid meta page). bbolt would fault the process on such a file; Open
	// refuses it instead, naming the file and what is wrong.
	ErrCorruptFile = errors.New("boltdb: corrupt file")

	// ErrLocked: Open waited Options.Timeout for the file's lock, which
	// another Store (of this or another process) holds. It wraps
	// storage.ErrUnavailable: the file may be free later.
	ErrLocked = fmt.Errorf("boltdb: file locked by another Store or process: %w", storage.ErrUnavailable)

	// ErrReadOnly: a write to a Store opened with Options.ReadOnly.
	ErrReadOnly = errors.New("boltdb: store opened read-only")

	// ErrCorrupt: a stored row does not decode. The row is reported, never
	// guessed at.
	ErrCorrupt = errors.New("boltdb: corrupt row")
)
