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
	// layout version (another application's file, or a newer layout).
	ErrIncompatible = errors.New("boltdb: incompatible file layout")

	// ErrCorrupt: a stored row does not decode. The row is reported, never
	// guessed at.
	ErrCorrupt = errors.New("boltdb: corrupt row")
)
