package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// jsonOutput is a --json file opened before a long run, so that a path
// that cannot be written fails at once rather than after the run. Its
// old content is replaced only by write, at the end; a file that open
// created and write never filled is removed by close.
type jsonOutput struct {
	f       *os.File
	path    string
	created bool
	written bool
}

// openJSONOutput opens (creating if needed) path for writing without
// changing its content.
func openJSONOutput(path string) (*jsonOutput, error) {
	_, statErr := os.Stat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--json: %w", err)
	}
	return &jsonOutput{f: f, path: path, created: errors.Is(statErr, fs.ErrNotExist)}, nil
}

// write replaces the file's content with v as indented JSON.
func (o *jsonOutput) write(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := o.f.Truncate(0); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	if _, err := o.f.WriteAt(append(b, '\n'), 0); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	o.written = true
	return nil
}

// close closes the file, and removes it if open created it and nothing
// was written.
func (o *jsonOutput) close() error {
	err := o.f.Close()
	if !o.written && o.created {
		err = errors.Join(err, os.Remove(o.path))
	}
	return err
}
