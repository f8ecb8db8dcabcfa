package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cqlseq/cqlseq/testenv/torture"
)

// grayPhase is the CI gray-failure check (-gray); not in the default set.
type grayPhase struct{}

func (grayPhase) name() string { return "gray" }

func (grayPhase) run(ctx context.Context, t *tort) error {
	if ok, err := t.needsNodes("gray"); !ok {
		return err
	}
	return t.grayCheck(ctx)
}

// grayCheck is the CI gray-failure check (issue 22): per -gray-modes mode,
// a bench at -fault-partitions x -fault-concurrency on a keyspace of
// replication factor 3, -warmup and measure.Lead of load, node -gray-node SIGSTOPped
// for -gray-pause, -gray-after more load, then verify --acks. It fails if
// an acknowledged command is lost (or any verify finding), or if the rate
// during the pause is below -gray-min of the rate before.
func (t *tort) grayCheck(ctx context.Context) error {
	targets := torture.Targets{During: t.c.gray.min}
	for _, mode := range t.c.gray.modes {
		t.subPhase("gray " + mode)
		tag := "gray_" + mode
		ks, err := t.keyspace(ctx, tag)
		if err != nil {
			return err
		}
		ack := filepath.Join(t.c.dir, "acks-"+tag+".log")
		ld := t.c.faultLoad
		c, err := t.startBench(ks, mode, ld, ack, tag)
		if err != nil {
			return err
		}
		r, err := t.grayRun(ctx, c, mode, ld, targets)
		c.stop()
		if err != nil {
			return fmt.Errorf("gray %s: %w", mode, err)
		}
		if err := t.verify(ctx, ks, ack, ld.partitions, r); err != nil {
			return err
		}
		fr := r.rates[0]
		verdict := "ok"
		if !fr.met {
			verdict = "FAILED"
			t.failed = true
		}
		if r.verifyFail {
			verdict += ", VERIFY FAILED"
		}
		r.note = fmt.Sprintf("node %d SIGSTOPped %v: ratio %.2f %s", t.c.gray.node, t.c.gray.pause, fr.r.RatioDuring(), verdict)
		fmt.Fprintf(t.out, "gray-check %s: %.1f acks/s in the %v before, %.1f acks/s during the %.1f s pause of node %d: ratio %.2f (need >= %.2g): %s; verify: %d lost, %d duplicates, %d regressions\n",
			mode, fr.r.Before.Rate(), measure.Lead, fr.r.During.Rate(), fr.r.During.Span.Seconds(), t.c.gray.node, fr.r.RatioDuring(), t.c.gray.min, verdict, r.lost, r.dups, r.regs)
		t.rows = append(t.rows, *r)
	}
	return nil
}

// grayRun runs the load and the pause of one gray check and interrupts the
// bench; the caller verifies.
func (t *tort) grayRun(ctx context.Context, c *child, mode string, ld load, targets torture.Targets) (*row, error) {
	smp, err := torture.StartSampler(ctx, c.ackLog, torture.DefaultSampleInterval)
	if err != nil {
		return nil, err
	}
	defer smp.Stop()
	r := &row{phase: fmt.Sprintf("gray check (%s, %dx%d)", mode, ld.partitions, ld.concurrency), targets: targets}
	first, err := t.firstAck(ctx, c, smp, 5*time.Minute)
	if err != nil {
		return nil, err
	}
	if err := sleep(ctx, time.Until(first.Add(t.c.warmup+measure.Lead))); err != nil {
		return nil, err
	}
	t.logf("gray %s: SIGSTOP node %d for %v", mode, t.c.gray.node, t.c.gray.pause)
	f, err := t.pauseNode(ctx, t.c.gray.node, t.c.gray.pause)
	if err != nil {
		return nil, err
	}
	r.faults++
	t.mark(fmt.Sprintf("node %d paused", t.c.gray.node), f.Began, f.Ended)
	if err := sleep(ctx, t.c.gray.after); err != nil {
		return nil, err
	}
	if after, err := t.ackAfter(ctx, c, smp, f.Ended, time.Millisecond); err == nil {
		r.recovery = after.Sub(f.Ended)
	}
	fr := t.rates(smp, f, fmt.Sprintf("node %d", t.c.gray.node), targets)
	r.rates = append(r.rates, fr)
	t.rateTarget(targets, fr)
	t.logf("gray %s: %s", mode, fr.describe())
	r.failed = c.interrupt()
	smp.Stop()
	r.acked = countAcks(c.ackLog)
	if fr.err != nil {
		return nil, fr.err
	}
	return r, nil
}
