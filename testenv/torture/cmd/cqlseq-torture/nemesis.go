package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cqlseq/cqlseq/testenv/torture"
)

// nemesisLoad is the load of the skew, contested and modechange phases:
// thousands of workspaces, so that many are written only once in a run
// (a number cell written early and never again).
var nemesisLoad = load{partitions: 2, concurrency: 4, workspaces: 4000}

// nemesis is what the skew, contested and modechange phases report beyond
// verify's counts.
type nemesis struct {
	runs      int    // bench processes
	skew      string // the clock offsets the owners ran with ("" none)
	unknown   int    // conditional writes whose outcome the client did not learn (logged)
	contested int    // partitions that both owners of a round took over
	shared    int    // takeovers at an epoch another owner of the round also took
	exits     int    // children that exited by themselves (a stopped run)
}

// owner is one bench process of a nemesis phase.
type owner struct {
	tag   string
	mode  string
	run   time.Duration // load after its first acknowledgement; then SIGKILL
	until time.Time     // if set instead of run: SIGKILL then (at least 0.5 s after its first ack)
	extra []string      // more bench flags (clock, LWT attempt timeout)
}

// startOwner starts o's bench on ks with its own ack log and its library
// messages logged (--log-level info: unknown outcomes, takeovers).
func (t *tort) startOwner(ks string, ld load, o owner) (*child, error) {
	ack := filepath.Join(t.c.dir, "acks-"+o.tag+".log")
	_ = os.Remove(ack)
	return t.startBench(ks, o.mode, ld, ack, o.tag, append([]string{"--log-level", "info"}, o.extra...)...)
}

// lwtArgs shorten the attempt of a conditional write so that some
// outcomes are unknown (-lwt-attempt-timeout, default by replication).
func (t *tort) lwtArgs() []string {
	d := t.c.lwtTimeout
	if d == 0 {
		d = 2 * time.Millisecond
		if t.rf() > 1 {
			d = 20 * time.Millisecond
		}
	}
	return []string{"--cql-lwt-attempt-timeout", d.String()}
}

// clockArgs are the bench flags of a clock offset and step back.
func clockArgs(offset, stepBack, stepAfter time.Duration) []string {
	var a []string
	if offset != 0 {
		a = append(a, "--clock-offset", offset.String())
	}
	if stepBack != 0 {
		a = append(a, "--clock-step-back", stepBack.String(), "--clock-step-after", stepAfter.String())
	}
	return a
}

// runOwner lets c run until o.run after its first acknowledgement (or
// until o.until) and SIGKILLs it. A child that exits by itself is counted
// in nm.exits and logged; one that exits before its first acknowledgement
// is an error when mustAck.
func (t *tort) runOwner(ctx context.Context, c *child, o owner, mustAck bool, nm *nemesis) error {
	defer c.stop()
	nm.runs++
	if _, err := waitAcks(ctx, c, 0, 3*time.Minute); err != nil {
		if ctx.Err() != nil || mustAck || c.exited() == nil {
			return fmt.Errorf("%s: %w", o.tag, err)
		}
		nm.exits++
		t.logf("%s: %v", o.tag, err)
		return nil
	}
	run := o.run
	if !o.until.IsZero() {
		run = max(time.Until(o.until), 500*time.Millisecond)
	}
	select {
	case <-time.After(run):
	case <-c.done:
		nm.exits++
		t.logf("%s: %v", o.tag, c.exited())
	case <-ctx.Done():
		return ctx.Err()
	}
	c.kill()
	return nil
}

// scanOwner adds what c logged to nm and returns its takeovers.
func scanOwner(c *child, nm *nemesis) ([]torture.TakeoverLog, error) {
	f, err := os.Open(c.errOut)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bl, err := torture.ScanBenchLog(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.errOut, err)
	}
	nm.unknown += bl.UnknownOutcomes()
	return bl.Takeovers, nil
}

// verifyOwners verifies every acknowledgement of the children on ks and
// adds r to the table.
func (t *tort) verifyOwners(ctx context.Context, ks string, ld load, cs []*child, r *row) error {
	logs := make([]string, len(cs))
	for i, c := range cs {
		logs[i] = c.ackLog
	}
	combined := filepath.Join(t.c.dir, "acks-"+strings.TrimPrefix(ks, t.ksBase+"_")+".log")
	if err := concatAcks(combined, logs); err != nil {
		return err
	}
	r.acked = countAcks(combined)
	if err := t.verify(ctx, ks, combined, ld.partitions, r); err != nil {
		return err
	}
	t.rows = append(t.rows, *r)
	return nil
}

// fmtOffset writes a clock offset with its sign ("+3s", "-30s", "0s").
func fmtOffset(d time.Duration) string {
	if d > 0 {
		return "+" + d.String()
	}
	return d.String()
}
