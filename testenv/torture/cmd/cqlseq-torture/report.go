package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/cqlseq/cqlseq/testenv/torture"
)

// row is one phase's line of the report.
type row struct {
	phase      string
	faults     int
	acked      int
	failed     string // busy or failed commands, as the children reported them
	lost       uint64
	dups       uint64
	regs       uint64
	recovery   time.Duration // the slowest recovery: from the fault's end to the next acknowledged command
	note       string
	verifyFail bool
	// Phases that measure rates: one entry per fault, and the targets.
	rates   []faultRates
	targets torture.Targets
	// nem is set by the skew, contested and modechange phases.
	nem *nemesis
	// tools is set by the tools phase.
	tools *toolsStats
	// service is set by the service phase.
	service *serviceStats
}

// faultRates are one fault's measured windows.
type faultRates struct {
	what  string // "node 2", "node 3 cut"
	r     torture.FaultRates
	err   error // the samples did not cover the windows
	met   bool
	fault torture.Fault
}

func (fr faultRates) describe() string {
	if fr.err != nil {
		return "rates not measured: " + fr.err.Error()
	}
	met := "targets met"
	if !fr.met {
		met = "TARGET MISSED"
	}
	return fmt.Sprintf("%.0f acks/s before, %.0f during %.1f s (ratio %.2f), %.0f from +%v (ratio %.2f): %s",
		fr.r.Before.Rate(), fr.r.During.Rate(), fr.r.During.Span.Seconds(), fr.r.RatioDuring(),
		fr.r.Late.Rate(), measure.Settle, fr.r.RatioLate(), met)
}

// targetsMet reports whether every fault of a rate-measuring row met its
// targets (true for rows that measure none).
func (r *row) targetsMet() bool {
	for _, fr := range r.rates {
		if !fr.met {
			return false
		}
	}
	return true
}

// total sums the row's measured windows (faults whose rates could not be
// measured are left out).
func (r *row) total() (torture.FaultRates, int) {
	var s torture.FaultRates
	n := 0
	for _, fr := range r.rates {
		if fr.err == nil {
			s = s.Add(fr.r)
			n++
		}
	}
	return s, n
}

func fmtRate(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", v)
}

func fmtRatio(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", v)
}

// faultTableAddsToSummary reports whether the per-fault table says more
// than the summary: a phase measured several faults, or a fault could not
// be measured (the table gives the reason). With one measured fault per
// phase (make gray-check) each row of it would repeat the summary's.
func faultTableAddsToSummary(rows []row) bool {
	for _, r := range rows {
		if len(r.rates) > 1 {
			return true
		}
		for _, fr := range r.rates {
			if fr.err != nil {
				return true
			}
		}
	}
	return false
}

func (t *tort) printTable() {
	w := t.out
	fmt.Fprintln(w, "| phase | faults injected | commands acked | busy/failed | lost | duplicates | regressions | recovery (max) | acks/s before | acks/s during | acks/s from +2 s | ratio during | ratio from +2 s | target met | note |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range t.rows {
		verdict := ""
		if r.verifyFail {
			verdict = " **verify FAILED**"
		}
		rates := "- | - | - | - | - | -"
		if len(r.rates) > 0 {
			s, n := r.total()
			met := 0
			for _, fr := range r.rates {
				if fr.met {
					met++
				}
			}
			yes := "yes"
			if met < len(r.rates) {
				yes = "**no**"
			}
			rates = fmt.Sprintf("%s | %s | %s | %s | %s | %s (%d of %d faults; %s)", fmtRate(s.Before.Rate()), fmtRate(s.During.Rate()), fmtRate(s.Late.Rate()),
				fmtRatio(s.RatioDuring()), fmtRatio(s.RatioLate()), yes, met, len(r.rates), r.targets.String(measure.Settle))
			if n < len(r.rates) {
				rates += fmt.Sprintf(", %d not measured", len(r.rates)-n)
			}
		}
		fmt.Fprintf(w, "| %s | %d | %d | %s | %d | %d | %d | %.1f s | %s | %s%s |\n", r.phase, r.faults, r.acked, r.failed,
			r.lost, r.dups, r.regs, r.recovery.Seconds(), rates, r.note, verdict)
	}
	t.printNemesis()
	t.printTools()
	t.printService()
	if !faultTableAddsToSummary(t.rows) {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| phase | # | fault | length | acks/s before (10 s) | acks/s during | acks/s from +2 s | ratio during | ratio from +2 s | target met |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range t.rows {
		for i, fr := range r.rates {
			if fr.err != nil {
				fmt.Fprintf(w, "| %s | %d | %s | %.1f s | not measured: %v | | | | | **no** |\n", r.phase, i+1, fr.what, fr.fault.Ended.Sub(fr.fault.Began).Seconds(), fr.err)
				continue
			}
			yes := "yes"
			if !fr.met {
				yes = "**no**"
			}
			fmt.Fprintf(w, "| %s | %d | %s | %.1f s | %s | %s | %s | %s | %s | %s |\n", r.phase, i+1, fr.what, fr.r.During.Span.Seconds(),
				fmtRate(fr.r.Before.Rate()), fmtRate(fr.r.During.Rate()), fmtRate(fr.r.Late.Rate()), fmtRatio(fr.r.RatioDuring()), fmtRatio(fr.r.RatioLate()), yes)
		}
	}
}

// printNemesis prints the skew, contested and modechange phases' table.
func (t *tort) printNemesis() {
	w := t.out
	header := false
	for _, r := range t.rows {
		nm := r.nem
		if nm == nil {
			continue
		}
		if !header {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| phase | runs | commands acked | clock skew | unknown outcomes | takeovers contested | epochs taken twice | runs that stopped | duplicates | lost | regressions | verify |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
			header = true
		}
		verdict := "OK"
		if r.verifyFail {
			verdict = "**FAILED**"
		}
		fmt.Fprintf(w, "| %s | %d | %d | %s | %d | %d | %d | %d | %d | %d | %d | %s |\n", r.phase, nm.runs, r.acked, nm.skew, nm.unknown,
			nm.contested, nm.shared, nm.exits, r.dups, r.lost, r.regs, verdict)
	}
}

// printTools prints the tools phase's table: one row per store and mode.
func (t *tort) printTools() {
	w := t.out
	header := false
	for _, r := range t.rows {
		st := r.tools
		if st == nil {
			continue
		}
		if !header {
			fmt.Fprintln(w)
			fmt.Fprintln(w, "| tools: store (mode) | owner runs | kills at the kill point | random kills | owners that exited | actualize --write runs | of them against a live owner | took over (printed) | commands acked | lost | duplicates | regressions | verify |")
			fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
			header = true
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n", strings.TrimPrefix(r.phase, "tools "), st.owners, st.pointKills,
			st.randomKills, st.exits, st.toolRuns, st.liveRuns, st.tookOver, r.acked, r.lost, r.dups, r.regs, st.verdict(r.verifyFail))
	}
}
