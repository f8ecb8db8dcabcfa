package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// htmlDoc is what the tests read from report.html.
type htmlDoc struct {
	tables int
	imgs   []string // src
	links  []string // href
	text   string
}

// parseHTML parses page as XML (the report is XHTML-style): it must be
// well-formed.
func parseHTML(t *testing.T, page []byte) htmlDoc {
	t.Helper()
	var doc htmlDoc
	var text strings.Builder
	d := xml.NewDecoder(bytes.NewReader(page))
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err, "report.html is well-formed")
		switch tk := tok.(type) {
		case xml.StartElement:
			attr := func(name string) string {
				for _, a := range tk.Attr {
					if a.Name.Local == name {
						return a.Value
					}
				}
				return ""
			}
			switch tk.Name.Local {
			case "table":
				doc.tables++
			case "img":
				doc.imgs = append(doc.imgs, attr("src"))
			case "a":
				doc.links = append(doc.links, attr("href"))
			case "script", "link":
				t.Errorf("report.html has a <%s>: it must work offline", tk.Name.Local)
			}
		case xml.CharData:
			text.Write(tk)
		}
	}
	doc.text = text.String()
	return doc
}

// TestReportHTML: the report of a run with two phases parses, has the
// phase tables as tables, one img per plot whose file exists, links to the
// children's files that exist, and the verify verdicts.
func TestReportHTML(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	pr, series := recordedPhase(t0)
	pr.drawSeries(dir, series)
	write := func(name string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("x\n"), 0o644))
		return p
	}
	pr.children = []*child{{tag: "partition_fenced", out: write("partition_fenced.out"), errOut: write("partition_fenced.err"),
		ackLog: write("acks-partition_fenced.log"), json: filepath.Join(dir, "partition_fenced.json"), // not written: no link
		timeline: write("partition_fenced.timeline.json")}}
	pr.cost = &phaseCost{acked: 9000, nodeCPU: 27 * time.Second}
	kills := &phaseRecord{phase: "kills"}
	kills.drawSeries(dir, nil)

	tt := &tort{c: config{dir: dir}, records: []*phaseRecord{pr, kills}, failed: true, rows: []row{
		{phase: "client SIGKILL", faults: 4, acked: 100, failed: "n/a (killed)", note: "2 modes"},
		{phase: "partition (fenced, 4x4)", faults: 2, acked: 9000, failed: "0/0", verifyFail: true},
	}}
	var out bytes.Buffer
	tt.out = &out
	require.NoError(t, tt.writeReport(errors.New("partition #2: a <child> died")))
	assert.Empty(t, out.String(), "the report does not print the tables again")
	page, err := os.ReadFile(filepath.Join(dir, reportFile))
	require.NoError(t, err)
	doc := parseHTML(t, page)

	assert.Equal(t, 2, doc.tables, "the phase table and the partition phase's faults")
	assert.Contains(t, doc.text, "client SIGKILL")
	assert.Contains(t, doc.text, "verify FAILED")
	assert.Contains(t, doc.text, "The run failed: partition #2: a <child> died")
	assert.Contains(t, doc.text, "Cost: the nodes used 3.00 core-ms per acknowledged command")
	require.Len(t, doc.imgs, 2, "one plot per phase")
	assert.Len(t, doc.links, 5, "the phase's timeline; the child's stdout, stderr, ack log, timeline (no report written)")
	assert.Contains(t, doc.text, "drawn again, in this directory, by cqlseq plot --timeline plot-partition_fenced_4x4.timeline.json --out plot-partition_fenced_4x4.svg --width 900 --height 500 --region '5:8:node 3 cut' --region '15:15.25:kill fenced' --target ")
	for _, ref := range append(doc.imgs, doc.links...) {
		assert.False(t, strings.Contains(ref, "://"), "%s: relative", ref)
		assert.FileExists(t, filepath.Join(dir, ref))
	}
}

// TestReportHTMLNoPhase: a run in which no phase ran writes a report that
// says so.
func TestReportHTMLNoPhase(t *testing.T) {
	dir := t.TempDir()
	tt := &tort{c: config{dir: dir}, out: io.Discard}
	require.NoError(t, tt.writeReport(nil))
	page, err := os.ReadFile(filepath.Join(dir, reportFile))
	require.NoError(t, err)
	doc := parseHTML(t, page)
	assert.Contains(t, doc.text, "No phase ran.")
	assert.Empty(t, doc.imgs)
}

// TestReportHTMLFailedPhase: a run whose only phase failed before its row
// says so instead of an empty table, and still shows the phase's plot.
func TestReportHTMLFailedPhase(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 11, 27, 22, 0, 0, 0, time.UTC)
	pr, series := recordedPhase(t0)
	pr.drawSeries(dir, series)
	tt := &tort{c: config{dir: dir}, out: io.Discard, records: []*phaseRecord{pr}}
	require.NoError(t, tt.writeReport(errors.New("skew: context canceled")))
	page, err := os.ReadFile(filepath.Join(dir, reportFile))
	require.NoError(t, err)
	doc := parseHTML(t, page)
	assert.Contains(t, doc.text, "The run failed: skew: context canceled")
	assert.Contains(t, doc.text, "No phase finished")
	assert.Equal(t, 1, doc.tables, "only the phase's fault windows")
	require.Len(t, doc.imgs, 1)
	assert.FileExists(t, filepath.Join(dir, doc.imgs[0]))
}
