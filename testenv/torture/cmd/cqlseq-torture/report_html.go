package main

import (
	"bytes"
	"fmt"
	"html"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cqlseq/cqlseq/testenv/torture"
)

// reportFile is the run's HTML report, in the run's directory.
const reportFile = "report.html"

// writeReport writes report.html into the run's directory: the phase
// tables, each phase's plot and fault windows, and links to the children's
// files. runErr is the run's error (nil: it ended). The page is XHTML-style
// and self-contained: no script, font or style sheet from the network.
func (t *tort) writeReport(runErr error) error {
	var tables bytes.Buffer
	if len(t.rows) > 0 {
		out := t.out
		t.out = &tables
		t.printTable()
		t.out = out
	}
	var b bytes.Buffer
	writeReportHTML(&b, t.c.dir, tables.String(), t.records, runErr, t.failed, t.missed)
	return os.WriteFile(filepath.Join(t.c.dir, reportFile), b.Bytes(), 0o644)
}

const reportStyle = `body{font-family:sans-serif;margin:1em 2em;max-width:1400px}
table{border-collapse:collapse;margin:0.5em 0 1em;font-size:13px}
td,th{border:1px solid #aaa;padding:2px 6px;text-align:left}
th{background:#eee}
.bad{color:#b00;font-weight:bold}.ok{color:#070;font-weight:bold}
img{border:1px solid #ccc;max-width:100%}`

func writeReportHTML(w io.Writer, dir, tables string, records []*phaseRecord, runErr error, failed, missed bool) {
	esc := html.EscapeString
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\">\n<head>\n<meta charset=\"utf-8\"/>\n<title>cqlseq-torture run</title>\n<style>%s</style>\n</head>\n<body>\n", reportStyle)
	p("<h1>cqlseq-torture run</h1>\n<p>Files in %s.</p>\n", esc(dir))
	switch {
	case runErr != nil:
		p("<p class=\"bad\">The run failed: %s</p>\n", esc(runErr.Error()))
	case failed:
		p("<p class=\"bad\">A check failed (see the tables).</p>\n")
	case missed:
		p("<p class=\"bad\">A rate target was missed (see the tables).</p>\n")
	default:
		p("<p class=\"ok\">Every check passed.</p>\n")
	}
	if len(records) == 0 {
		p("<p>No phase ran.</p>\n</body>\n</html>\n")
		return
	}
	p("<h2>Tables</h2>\n")
	if tables == "" {
		p("<p>No phase finished: no table rows.</p>\n")
	}
	markdownTables(w, tables)
	for _, pr := range records {
		p("<h2>Phase %s</h2>\n", esc(pr.phase))
		switch {
		case pr.svg != "":
			p("<p><img src=\"%s\" alt=\"%s: rate and latency over time\"/></p>\n", esc(pr.svg), esc(pr.phase))
			p("<p>Rate: the children's acknowledged commands summed, sampled from their ack logs every %v (a SIGKILLed child's too). "+
				"Latency: the worst child's, only from the children that wrote a timeline (%d of %d; a SIGKILLed child writes none).", torture.DefaultSampleInterval, pr.timelines(), len(pr.children))
			if pr.target > 0 {
				p(" The dashed line: %s.", esc(pr.targetLabel))
			}
			p("</p>\n")
			if pr.redraw != "" {
				p("<p>Its <a href=\"%s\">timeline</a>; drawn again, in this directory, by <code>%s</code></p>\n", esc(pr.timeline), esc(pr.redraw))
			}
		case pr.plotErr != "":
			p("<p class=\"bad\">No plot: %s</p>\n", esc(pr.plotErr))
		default:
			p("<p>No plot.</p>\n")
		}
		if pr.cost != nil {
			p("<p>Cost: %s</p>\n", esc(pr.cost.String()))
		}
		if len(pr.windows) > 0 {
			p("<p>Faults (shaded on the plot):</p>\n<table>\n<tr><th>#</th><th>fault</th><th>began</th><th>ended</th><th>length</th></tr>\n")
			for i, wd := range pr.windows {
				p("<tr><td>%d</td><td>%s</td><td>%s</td><td>%s</td><td>%.1f s</td></tr>\n", i+1, esc(wd.label),
					wd.began.Format("15:04:05.000"), wd.ended.Format("15:04:05.000"), wd.ended.Sub(wd.began).Seconds())
			}
			p("</table>\n")
		}
		if len(pr.children) > 0 {
			p("<p>Children:</p>\n<ul>\n")
			for _, c := range pr.children {
				p("<li>%s:", esc(c.tag))
				for _, f := range []struct{ name, path string }{{"stdout", c.out}, {"stderr", c.errOut}, {"ack log", c.ackLog}, {"report", c.json}, {"timeline", c.timeline}} {
					if _, err := os.Stat(f.path); err == nil {
						p(" <a href=\"%s\">%s</a>", esc(relTo(dir, f.path)), f.name)
					}
				}
				p("</li>\n")
			}
			p("</ul>\n")
		}
	}
	p("</body>\n</html>\n")
}

// relTo is path relative to dir when it is inside it.
func relTo(dir, path string) string {
	if r, err := filepath.Rel(dir, path); err == nil && !strings.HasPrefix(r, "..") {
		return filepath.ToSlash(r)
	}
	return "file://" + path
}

// markdownTables writes the Markdown tables of md as HTML tables and its
// other lines as paragraphs; **x** becomes bold.
func markdownTables(w io.Writer, md string) {
	inTable, header := false, false
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				fmt.Fprint(w, "</table>\n")
				inTable = false
			}
			if strings.TrimSpace(line) != "" {
				fmt.Fprintf(w, "<p>%s</p>\n", inline(line))
			}
			continue
		}
		if strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		tag := "td"
		if !inTable {
			fmt.Fprint(w, "<table>\n")
			inTable, header = true, true
		}
		if header {
			tag, header = "th", false
		}
		fmt.Fprint(w, "<tr>")
		for _, c := range cells {
			fmt.Fprintf(w, "<%s>%s</%s>", tag, inline(strings.TrimSpace(c)), tag)
		}
		fmt.Fprint(w, "</tr>\n")
	}
	if inTable {
		fmt.Fprint(w, "</table>\n")
	}
}

// inline escapes s and turns **x** into a bold x.
func inline(s string) string {
	parts := strings.Split(html.EscapeString(s), "**")
	var b strings.Builder
	for i, part := range parts {
		if i%2 == 1 && i < len(parts)-1 {
			b.WriteString("<b class=\"bad\">" + part + "</b>")
		} else {
			if i%2 == 1 {
				b.WriteString("**")
			}
			b.WriteString(part)
		}
	}
	return b.String()
}

// timelines counts the children that wrote a timeline.
func (pr *phaseRecord) timelines() int {
	n := 0
	for _, c := range pr.children {
		if _, err := os.Stat(c.timeline); err == nil {
			n++
		}
	}
	return n
}
