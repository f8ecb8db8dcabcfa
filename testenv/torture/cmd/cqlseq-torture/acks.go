package main

import (
	"bytes"
	"context"
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

// waitAcks waits until path has more than n acknowledgements and returns
// how long that took, or an error after limit.
func waitAcks(ctx context.Context, path string, n int, limit time.Duration) (time.Duration, error) {
	began := time.Now()
	c := plogcheck.NewAckCounter(path)
	for {
		got, err := c.Count()
		if err != nil {
			return 0, err
		}
		if got > n {
			return time.Since(began), nil
		}
		if time.Since(began) > limit {
			return 0, fmt.Errorf("no acknowledged command within %v (%s has %d)", limit, path, got)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return 0, err
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
		select {
		case <-c.done:
			b, _ := os.ReadFile(c.out)
			return time.Time{}, fmt.Errorf("the bench ended: %v\n%s", c.err, b)
		default:
		}
		if err := sleep(ctx, torture.DefaultSampleInterval); err != nil {
			return time.Time{}, err
		}
	}
}

// recovered waits for the next acknowledgement after a fault ended and
// records how long it took.
func recovered(ctx context.Context, ack string, r *row) error {
	d, err := waitAcks(ctx, ack, countAcks(ack), 3*time.Minute)
	if err != nil {
		return err
	}
	r.recovery = max(r.recovery, d)
	return nil
}

// concatAcks writes the complete lines of each log to path.
func concatAcks(path string, logs []string) error {
	var buf bytes.Buffer
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			return err
		}
		complete, _ := plogcheck.CompleteLines(b)
		buf.Write(complete)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
