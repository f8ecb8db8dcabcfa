package timeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// jsonTimeline is the JSON layout:
//
//	{
//	  "format": "cqlseq timeline 1",
//	  "title": "cqlseq bench: ...",
//	  "start": "2026-01-02T03:04:05.123456789Z",
//	  "interval_s": 1,
//	  "units": {"start_s": "seconds since start: ...", ...},
//	  "intervals": [
//	    {"start_s": 0, "length_s": 1, "acked": 1234, "busy": 0, "failed": 0,
//	     "p50_ms": 0.8, "p99_ms": 2.5, "max_ms": 7.1},
//	    ...
//	  ]
//	}
type jsonTimeline struct {
	Format    string            `json:"format"`
	Title     string            `json:"title"`
	Start     string            `json:"start"`
	IntervalS float64           `json:"interval_s"`
	Units     map[string]string `json:"units"`
	Intervals []jsonInterval    `json:"intervals"`
}

type jsonInterval struct {
	StartS  float64 `json:"start_s"`
	LengthS float64 `json:"length_s"`
	Acked   uint64  `json:"acked"`
	Busy    uint64  `json:"busy"`
	Failed  uint64  `json:"failed"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	MaxMs   float64 `json:"max_ms"`
}

// WriteJSON writes t as indented JSON, each interval on one line (a run of
// an hour stays readable).
func (t *Timeline) WriteJSON(w io.Writer) error {
	if err := t.Validate(); err != nil {
		return err
	}
	js := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err) // strings, numbers and a struct of them always marshal
		}
		return string(b)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "{\n  \"format\": %s,\n  \"title\": %s,\n  \"start\": %s,\n  \"interval_s\": %s,\n  \"units\": {",
		js(Format), js(t.Title), js(t.Start.UTC().Format(startLayout)), js(seconds(t.Interval)))
	for i, c := range columns {
		fmt.Fprintf(&b, "\n    %s: %s%s", js(c), js(units[i]), comma(i, len(columns)))
	}
	b.WriteString("\n  },\n  \"intervals\": [")
	for i, iv := range t.Intervals {
		ji := jsonInterval{StartS: seconds(iv.Start), LengthS: seconds(iv.Length), Acked: iv.Acked,
			Busy: iv.Busy, Failed: iv.Failed, P50Ms: millis(iv.P50), P99Ms: millis(iv.P99), MaxMs: millis(iv.Max)}
		fmt.Fprintf(&b, "\n    %s%s", js(ji), comma(i, len(t.Intervals)))
	}
	if len(t.Intervals) > 0 {
		b.WriteString("\n  ")
	}
	b.WriteString("]\n}\n")
	_, err := b.WriteTo(w)
	return err
}

// comma returns the separator after element i of n.
func comma(i, n int) string {
	if i == n-1 {
		return ""
	}
	return ","
}

// ReadJSON reads a Timeline that WriteJSON wrote.
func ReadJSON(r io.Reader) (*Timeline, error) {
	t, err := readJSON(r)
	if err != nil {
		return nil, fmt.Errorf("timeline: JSON: %w", err)
	}
	return t, nil
}

func readJSON(r io.Reader) (*Timeline, error) {
	var j jsonTimeline
	d := json.NewDecoder(r)
	d.DisallowUnknownFields()
	if err := d.Decode(&j); err != nil {
		return nil, err
	}
	if j.Format != Format {
		return nil, fmt.Errorf("format %q, want %q", j.Format, Format)
	}
	t, err := header(j.Title, j.Start, j.IntervalS)
	if err != nil {
		return nil, err
	}
	t.Intervals = make([]Interval, len(j.Intervals))
	for i, ji := range j.Intervals {
		var errs [5]error
		iv := &t.Intervals[i]
		iv.Start, errs[0] = fromFloat(ji.StartS, 1e9, "start_s")
		iv.Length, errs[1] = fromFloat(ji.LengthS, 1e9, "length_s")
		iv.Acked, iv.Busy, iv.Failed = ji.Acked, ji.Busy, ji.Failed
		iv.P50, errs[2] = fromFloat(ji.P50Ms, 1e6, "p50_ms")
		iv.P99, errs[3] = fromFloat(ji.P99Ms, 1e6, "p99_ms")
		iv.Max, errs[4] = fromFloat(ji.MaxMs, 1e6, "max_ms")
		if err := errors.Join(errs[:]...); err != nil {
			return nil, fmt.Errorf("interval %d: %w", i, err)
		}
	}
	return t, t.problems()
}

// header returns a Timeline with the header's fields.
func header(title, start string, intervalS float64) (*Timeline, error) {
	st, err := time.Parse(startLayout, start)
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	iv, err := fromFloat(intervalS, 1e9, "interval_s")
	if err != nil {
		return nil, err
	}
	return &Timeline{Title: title, Start: st.UTC(), Interval: iv}, nil
}
