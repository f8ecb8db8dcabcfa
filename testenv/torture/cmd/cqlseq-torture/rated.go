package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/cqlseq/cqlseq/testenv/torture"
)

// underLoad runs fault n times while a child bench in mode runs on the
// phase's own keyspace, then interrupts the child and verifies.
func (t *tort) underLoad(ctx context.Context, name, mode string, n int, fault func(ctx context.Context, i int, c *child, r *row) error) error {
	ks, err := t.keyspace(ctx, name)
	if err != nil {
		return err
	}
	ack := filepath.Join(t.c.dir, "acks-"+name+".log")
	c, err := t.startBench(ks, mode, smallLoad, ack, name)
	if err != nil {
		return err
	}
	defer c.stop()
	r := row{phase: name}
	if _, err := waitAcks(ctx, c, 0, 5*time.Minute); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for i := range n {
		if err := fault(ctx, i, c, &r); err != nil {
			return fmt.Errorf("%s #%d: %w", name, i+1, err)
		}
		r.faults++
		if err := c.exited(); err != nil {
			return fmt.Errorf("%s: the bench ended under the fault: %w", name, err)
		}
	}
	r.failed = c.interrupt()
	r.acked = countAcks(ack)
	if err := t.verify(ctx, ks, ack, smallLoad.partitions, &r); err != nil {
		return err
	}
	t.rows = append(t.rows, r)
	return nil
}

// injector injects fault number i and returns when it began and ended and
// what it hit ("node 2"). It undoes the fault before returning, also on
// an error.
type injector func(ctx context.Context, i int) (torture.Fault, string, error)

// rated runs a rate-measuring phase in mode: a bench at -fault-partitions x
// -fault-concurrency on the phase's own keyspace, its ack log sampled
// every 250 ms; n faults, each after at least measure.Lead of load since
// the bench's first ack (plus -warmup) or the previous fault's recovery; then the bench
// is interrupted and its acks verified.
func (t *tort) rated(ctx context.Context, name, mode string, n int, targets torture.Targets, inject injector) (*row, error) {
	tag := name + "_" + mode
	t.subPhase(name + " " + mode)
	ks, err := t.keyspace(ctx, tag)
	if err != nil {
		return nil, err
	}
	ack := filepath.Join(t.c.dir, "acks-"+tag+".log")
	ld := t.c.faultLoad
	c, err := t.startBench(ks, mode, ld, ack, tag)
	if err != nil {
		return nil, err
	}
	defer c.stop()
	smp, err := torture.StartSampler(ctx, ack, torture.DefaultSampleInterval)
	if err != nil {
		return nil, err
	}
	defer smp.Stop()
	r := &row{phase: fmt.Sprintf("%s (%s, %dx%d)", name, mode, ld.partitions, ld.concurrency), targets: targets}
	steady, err := t.firstAck(ctx, c, smp, 5*time.Minute)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", tag, err)
	}
	steady = steady.Add(t.c.warmup)
	for i := range n {
		if err := sleep(ctx, time.Until(steady.Add(measure.Lead))); err != nil {
			return nil, err
		}
		f, what, err := inject(ctx, i)
		if err != nil {
			return nil, fmt.Errorf("%s #%d: %w", tag, i+1, err)
		}
		r.faults++
		t.mark(what, f.Began, f.Ended)
		// Recovery: the first ack after the fault ended.
		if steady, err = t.ackAfter(ctx, c, smp, f.Ended, 3*time.Minute); err != nil {
			return nil, fmt.Errorf("%s #%d: %w", tag, i+1, err)
		}
		r.recovery = max(r.recovery, steady.Sub(f.Ended))
		fr := t.rates(smp, f, what, targets)
		r.rates = append(r.rates, fr)
		t.rateTarget(targets, fr)
		t.logf("%s #%d (%s): %s", tag, i+1, what, fr.describe())
	}
	r.failed = c.interrupt()
	smp.Stop()
	r.acked = countAcks(ack)
	if err := t.verify(ctx, ks, ack, ld.partitions, r); err != nil {
		return nil, err
	}
	t.rows = append(t.rows, *r)
	if !r.targetsMet() {
		t.missed = true
	}
	return &t.rows[len(t.rows)-1], nil
}

// rates measures the windows around f from smp's samples.
func (t *tort) rates(smp *torture.Sampler, f torture.Fault, what string, targets torture.Targets) faultRates {
	samples, serr := smp.Samples()
	fr := faultRates{what: what, fault: f}
	fr.r, fr.err = measure.Rates(samples, f)
	if fr.err == nil && serr != nil {
		fr.err = serr
	}
	fr.met = fr.err == nil && targets.Met(fr.r)
	return fr
}
