package timeline

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// randomTimeline returns a valid timeline with awkward values: a start
// with nanoseconds, an interval of 250 ms, latencies to the nanosecond,
// empty intervals, a short last one.
func randomTimeline(seed uint64, n int) *Timeline {
	rng := rand.New(rand.NewPCG(seed, 7))
	iv := 250 * time.Millisecond
	tl := &Timeline{Title: `bench "x", mode trust0: 4 partitions`, Start: t0, Interval: iv}
	for i := range n {
		in := Interval{Start: time.Duration(i) * iv, Length: iv}
		if i == n-1 {
			in.Length = time.Duration(1 + rng.Int64N(int64(iv)))
		}
		if rng.IntN(4) > 0 {
			in.Acked = rng.Uint64N(1 << 40)
			in.Busy = rng.Uint64N(100)
			in.Failed = rng.Uint64N(3)
			a := time.Duration(rng.Int64N(int64(time.Hour)))
			b := time.Duration(rng.Int64N(int64(time.Hour)))
			c := time.Duration(rng.Int64N(int64(time.Hour)))
			in.P50, in.P99, in.Max = min(a, b, c), max(min(a, b), min(max(a, b), c)), max(a, b, c)
		}
		tl.Intervals = append(tl.Intervals, in)
	}
	return tl
}

// TestTimelineJSONAndCSVRoundTripExactly: what is written reads back equal
// to the nanosecond, in both formats, through files too.
func TestTimelineJSONAndCSVRoundTripExactly(t *testing.T) {
	dir := t.TempDir()
	for seed := range uint64(20) {
		want := randomTimeline(seed, int(seed*7))
		require.NoError(t, want.Validate())
		if len(want.Intervals) == 0 {
			want.Intervals = nil
		}
		var jb, cb bytes.Buffer
		require.NoError(t, want.WriteJSON(&jb))
		require.NoError(t, want.WriteCSV(&cb))
		for name, read := range map[string]func() (*Timeline, error){
			"json": func() (*Timeline, error) { return ReadJSON(bytes.NewReader(jb.Bytes())) },
			"csv":  func() (*Timeline, error) { return ReadCSV(bytes.NewReader(cb.Bytes())) },
		} {
			got, err := read()
			require.NoError(t, err, "seed %d %s", seed, name)
			if len(got.Intervals) == 0 {
				got.Intervals = nil
			}
			require.Equal(t, want, got, "seed %d %s:\n%s%s", seed, name, jb.String(), cb.String())
		}
		for _, ext := range []string{".json", ".csv", ".CSV"} {
			p := filepath.Join(dir, "t"+ext)
			require.NoError(t, want.WriteFile(p))
			got, err := ReadFile(p)
			require.NoError(t, err)
			if len(got.Intervals) == 0 {
				got.Intervals = nil
			}
			require.Equal(t, want, got, "seed %d %s", seed, ext)
		}
	}
}

// TestTimelineLayouts pins the documented layouts: the header, the units,
// one row per interval.
func TestTimelineLayouts(t *testing.T) {
	tl := &Timeline{Title: "run", Start: t0, Interval: time.Second, Intervals: []Interval{
		{Start: 0, Length: time.Second, Acked: 10, Busy: 2, Failed: 1, P50: 800 * time.Microsecond, P99: 2500 * time.Microsecond, Max: 7100 * time.Microsecond},
		{Start: time.Second, Length: 500 * time.Millisecond},
	}}
	var cb bytes.Buffer
	require.NoError(t, tl.WriteCSV(&cb))
	lines := strings.Split(strings.TrimSuffix(cb.String(), "\n"), "\n")
	require.Len(t, lines, 8)
	assert.Equal(t, []string{"# cqlseq timeline 1", "# title: run", "# start: 2026-03-04T05:06:07.123456789Z", "# interval_s: 1"}, lines[:4])
	assert.True(t, strings.HasPrefix(lines[4], "# units: start_s: seconds since start"), lines[4])
	assert.Contains(t, lines[4], "p99_ms: milliseconds")
	assert.Equal(t, "start_s,length_s,acked,busy,failed,p50_ms,p99_ms,max_ms", lines[5])
	assert.Equal(t, "0,1,10,2,1,0.8,2.5,7.1", lines[6])
	assert.Equal(t, "1,0.5,0,0,0,0,0,0", lines[7])

	var jb bytes.Buffer
	require.NoError(t, tl.WriteJSON(&jb))
	js := jb.String()
	for _, want := range []string{`"format": "cqlseq timeline 1"`, `"start": "2026-03-04T05:06:07.123456789Z"`, `"interval_s": 1`,
		`"units": {`, `"max_ms": "milliseconds: largest latency of the same"`,
		"\n    {\"start_s\":0,\"length_s\":1,\"acked\":10,\"busy\":2,\"failed\":1,\"p50_ms\":0.8,\"p99_ms\":2.5,\"max_ms\":7.1},\n",
		"\n    {\"start_s\":1,\"length_s\":0.5,\"acked\":0,\"busy\":0,\"failed\":0,\"p50_ms\":0,\"p99_ms\":0,\"max_ms\":0}\n  ]\n}\n"} {
		assert.Contains(t, js, want)
	}

	empty := &Timeline{Start: t0, Interval: time.Second}
	jb.Reset()
	require.NoError(t, empty.WriteJSON(&jb))
	assert.True(t, strings.HasSuffix(jb.String(), `"intervals": []`+"\n}\n"), jb.String())
	got, err := ReadJSON(&jb)
	require.NoError(t, err)
	assert.Empty(t, got.Intervals)
}

func TestTimelineReadRejectsWhatItDidNotWrite(t *testing.T) {
	good := &Timeline{Start: t0, Interval: time.Second, Intervals: []Interval{{Length: time.Second, Acked: 1, P50: 1, P99: 1, Max: 1}}}
	var cb, jb bytes.Buffer
	require.NoError(t, good.WriteCSV(&cb))
	require.NoError(t, good.WriteJSON(&jb))
	csvText, jsonText := cb.String(), jb.String()
	for name, c := range map[string]struct{ text, werr string }{
		"csv format":        {strings.Replace(csvText, "timeline 1", "timeline 2", 1), "first line"},
		"csv header":        {strings.Replace(csvText, "# interval_s", "# intervals", 1), "header line"},
		"csv no start":      {strings.Replace(csvText, "# start", "# title", 1), "given twice"},
		"csv columns":       {strings.Replace(csvText, "p50_ms,", "p90_ms,", 1), "columns"},
		"csv count":         {strings.Replace(csvText, "0,1,1,", "0,1,x,", 1), "acked"},
		"csv fields":        {csvText + "1,1,1\n", "wrong number of fields"},
		"csv out of place":  {csvText + "5,1,0,0,0,0,0,0\n", "interval 1 starts at 5s"},
		"json format":       {strings.Replace(jsonText, "timeline 1", "timeline 2", 1), "format"},
		"json unknown":      {strings.Replace(jsonText, `"title"`, `"tittle"`, 1), "unknown field"},
		"json start":        {strings.Replace(jsonText, "2026-", "26-", 1), "start"},
		"json negative":     {strings.Replace(jsonText, `"p50_ms":0.000001`, `"p50_ms":-1`, 1), "p50_ms -1"},
		"json order":        {strings.Replace(jsonText, `"max_ms":0.000001`, `"max_ms":0`, 1), "p50 <= p99 <= max"},
		"json interval":     {strings.Replace(jsonText, `"interval_s": 1`, `"interval_s": 0`, 1), "interval 0s"},
		"json long last":    {strings.Replace(jsonText, `"length_s":1`, `"length_s":2`, 1), "2s long"},
		"json lonely max":   {strings.Replace(jsonText, `"acked":1`, `"acked":0`, 1), "without an acknowledged"},
		"json not a number": {strings.Replace(jsonText, `"busy":0`, `"busy":"0"`, 1), "busy"},
	} {
		var err error
		if strings.HasPrefix(name, "csv") {
			_, err = ReadCSV(strings.NewReader(c.text))
			if err != nil {
				assert.True(t, strings.HasPrefix(err.Error(), "timeline: CSV: "), "%s: %v", name, err)
			}
		} else {
			_, err = ReadJSON(strings.NewReader(c.text))
			if err != nil {
				assert.True(t, strings.HasPrefix(err.Error(), "timeline: JSON: "), "%s: %v", name, err)
			}
		}
		if assert.Error(t, err, name) {
			assert.Contains(t, err.Error(), c.werr, name)
		}
	}

	require.ErrorIs(t, CheckPath("t.txt"), ErrExtension)
	require.ErrorIs(t, good.WriteFile(filepath.Join(t.TempDir(), "t")), ErrExtension)
	_, err := ReadFile("t.svg")
	require.ErrorIs(t, err, ErrExtension)
	_, err = ReadFile(filepath.Join(t.TempDir(), "missing.json"))
	require.ErrorIs(t, err, os.ErrNotExist)
	bad := *good
	bad.Title = "two\nlines"
	assert.ErrorContains(t, bad.WriteCSV(&cb), "one line")
}
