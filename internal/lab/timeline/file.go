package timeline

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrExtension is returned for a path that ends neither in .json nor .csv.
var ErrExtension = errors.New("timeline: a file's name must end in .json or .csv")

// CheckPath returns ErrExtension (wrapped, naming path) unless path ends
// in .json or .csv (any case): the format ReadFile and WriteFile use.
func CheckPath(path string) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json", ".csv":
		return nil
	}
	return fmt.Errorf("%w: %q", ErrExtension, path)
}

func isCSV(path string) bool { return strings.ToLower(filepath.Ext(path)) == ".csv" }

// WriteFile writes t to path, as JSON or CSV by path's extension.
func (t *Timeline) WriteFile(path string) error {
	if err := CheckPath(path); err != nil {
		return err
	}
	var b bytes.Buffer
	var err error
	if isCSV(path) {
		err = t.WriteCSV(&b)
	} else {
		err = t.WriteJSON(&b)
	}
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	return nil
}

// ReadFile reads a Timeline from path, as JSON or CSV by path's extension.
func ReadFile(path string) (*Timeline, error) {
	if err := CheckPath(path); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("timeline: %w", err)
	}
	defer f.Close()
	if isCSV(path) {
		t, err := readCSV(bufio.NewReader(f))
		if err != nil {
			return nil, fmt.Errorf("timeline: %s: CSV: %w", path, err)
		}
		return t, nil
	}
	t, err := readJSON(f)
	if err != nil {
		return nil, fmt.Errorf("timeline: %s: JSON: %w", path, err)
	}
	return t, nil
}
