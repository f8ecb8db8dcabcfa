package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cqlseq/cqlseq/plog/plogcheck"
	"github.com/cqlseq/cqlseq/testenv/torture"
)

// countAcks counts the complete acknowledgement lines of path (0 if it
// cannot be read).
func countAcks(path string) int {
	n, err := plogcheck.NewAckCounter(path).Count()
	if err != nil {
		return 0
	}
	return n
}

// waitAcks waits until c's ack log has more than n acknowledgements and
// returns how long that took. It fails at once when c exits (with its
// stderr's last line), and after limit.
func waitAcks(ctx context.Context, c *child, n int, limit time.Duration) (time.Duration, error) {
	began := time.Now()
	ac := plogcheck.NewAckCounter(c.ackLog)
	for {
		got, err := ac.Count()
		if err != nil {
			return 0, err
		}
		if got > n {
			return time.Since(began), nil
		}
		if err := c.exited(); err != nil {
			return 0, fmt.Errorf("waiting for an acknowledged command (%s has %d): %w", c.ackLog, got, err)
		}
		if time.Since(began) > limit {
			return 0, fmt.Errorf("no acknowledged command within %v (%s has %d)", limit, c.ackLog, got)
		}
		select {
		case <-c.done:
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// firstAck waits for the child's first ack and returns when the sampler saw it.
func (t *tort) firstAck(ctx context.Context, c *child, smp *torture.Sampler, limit time.Duration) (time.Time, error) {
	return t.ackAfter(ctx, c, smp, time.Time{}, limit)
}

// ackAfter waits until a sample taken after `after` counts more acks than
// the last sample at or before it, and returns that sample's time.
func (t *tort) ackAfter(ctx context.Context, c *child, smp *torture.Sampler, after time.Time, limit time.Duration) (time.Time, error) {
	began := time.Now()
	for {
		samples, err := smp.Samples()
		if err != nil {
			return time.Time{}, err
		}
		base := -1
		for _, s := range samples {
			if !s.At.After(after) {
				base = s.Acks
				continue
			}
			if base < 0 {
				base = 0
			}
			if s.Acks > base {
				return s.At, nil
			}
		}
		if time.Since(began) > limit {
			return time.Time{}, fmt.Errorf("no acknowledged command within %v (%s)", limit, c.ackLog)
		}
		if err := c.exited(); err != nil {
			return time.Time{}, err
		}
		if err := sleep(ctx, torture.DefaultSampleInterval); err != nil {
			return time.Time{}, err
		}
	}
}

// recovered waits for c's next acknowledgement after a fault ended and
// records how long it took.
func recovered(ctx context.Context, c *child, r *row) error {
	d, err := waitAcks(ctx, c, countAcks(c.ackLog), 3*time.Minute)
	if err != nil {
		return err
	}
	r.recovery = max(r.recovery, d)
	return nil
}

// concatAcks writes the complete lines of each log to path (a log that
// does not exist has none).
func concatAcks(path string, logs []string) error {
	var buf bytes.Buffer
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if errors.Is(err, os.ErrNotExist) {
			continue // a child that ended before it acknowledged anything
		}
		if err != nil {
			return err
		}
		complete, _ := plogcheck.CompleteLines(b)
		buf.Write(complete)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
