package timeline

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The CSV layout: header lines starting with "# ", then the columns' names
// and one row per interval:
//
//	# cqlseq timeline 1
//	# title: cqlseq bench: ...
//	# start: 2026-01-02T03:04:05.123456789Z
//	# interval_s: 1
//	# units: start_s: seconds since start: ...; length_s: ...; ...
//	start_s,length_s,acked,busy,failed,p50_ms,p99_ms,max_ms
//	0,1,1234,0,0,0.8,2.5,7.1
//
// (pandas: read_csv(path, comment="#")).

// WriteCSV writes t as CSV.
func (t *Timeline) WriteCSV(w io.Writer) error {
	if err := t.Validate(); err != nil {
		return err
	}
	bw := bufio.NewWriter(w)
	var us []string
	for i, c := range columns {
		us = append(us, c+": "+units[i])
	}
	fmt.Fprintf(bw, "# %s\n# title: %s\n# start: %s\n# interval_s: %s\n# units: %s\n", Format, t.Title,
		t.Start.UTC().Format(startLayout), strconv.FormatFloat(seconds(t.Interval), 'f', -1, 64), strings.Join(us, "; "))
	cw := csv.NewWriter(bw)
	if err := cw.Write(columns); err != nil {
		return err
	}
	for _, iv := range t.Intervals {
		if err := cw.Write(row(iv)); err != nil {
			return err
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	return bw.Flush()
}

// ReadCSV reads a Timeline that WriteCSV wrote.
func ReadCSV(r io.Reader) (*Timeline, error) {
	t, err := readCSV(bufio.NewReader(r))
	if err != nil {
		return nil, fmt.Errorf("timeline: CSV: %w", err)
	}
	return t, nil
}

func readCSV(br *bufio.Reader) (*Timeline, error) {
	first, err := br.ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if strings.TrimRight(first, "\r\n") != "# "+Format {
		return nil, fmt.Errorf("first line %q, want %q", strings.TrimRight(first, "\r\n"), "# "+Format)
	}
	fields := map[string]string{}
	for {
		b, err := br.Peek(1)
		if err != nil || b[0] != '#' {
			break
		}
		line, err := br.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimRight(line, "\r\n"), "# "), ": ")
		if !ok {
			k, v = strings.TrimSuffix(k, ":"), "" // "# title:" with an empty title
		}
		switch k {
		case "title", "start", "interval_s", "units":
		default:
			return nil, fmt.Errorf("header line %q: want title, start, interval_s or units", strings.TrimRight(line, "\r\n"))
		}
		if _, dup := fields[k]; dup {
			return nil, fmt.Errorf("header %q given twice", k)
		}
		fields[k] = v
	}
	for _, k := range []string{"start", "interval_s"} {
		if _, ok := fields[k]; !ok {
			return nil, fmt.Errorf("no %q header line", k)
		}
	}
	is, err := strconv.ParseFloat(fields["interval_s"], 64)
	if err != nil {
		return nil, fmt.Errorf("interval_s: %w", err)
	}
	t, err := header(fields["title"], fields["start"], is)
	if err != nil {
		return nil, err
	}
	cr := csv.NewReader(br)
	cr.FieldsPerRecord = len(columns)
	cr.ReuseRecord = true
	names, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("the columns' names: %w", err)
	}
	if !slices.Equal(names, columns) {
		return nil, fmt.Errorf("columns %q, want %q", names, columns)
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return t, t.problems()
		}
		if err != nil {
			return nil, err
		}
		iv, err := parseRow(rec)
		if err != nil {
			return nil, fmt.Errorf("interval %d: %w", len(t.Intervals), err)
		}
		t.Intervals = append(t.Intervals, iv)
	}
}

// parseRow reads what row wrote.
func parseRow(rec []string) (Interval, error) {
	var errs []error
	f := func(i int) float64 {
		v, err := strconv.ParseFloat(rec[i], 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", columns[i], err))
		}
		return v
	}
	d := func(i int, unit float64) time.Duration {
		v, err := fromFloat(f(i), unit, columns[i])
		if err != nil {
			errs = append(errs, err)
		}
		return v
	}
	u := func(i int) uint64 {
		v, err := strconv.ParseUint(rec[i], 10, 64)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", columns[i], err))
		}
		return v
	}
	iv := Interval{Start: d(0, 1e9), Length: d(1, 1e9), Acked: u(2), Busy: u(3), Failed: u(4),
		P50: d(5, 1e6), P99: d(6, 1e6), Max: d(7, 1e6)}
	return iv, errors.Join(errs...)
}
