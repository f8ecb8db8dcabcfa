package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// killsPhase SIGKILLs child benches (-kills, rotating through -modes).
type killsPhase struct{}

func (killsPhase) name() string { return "kills" }

func (killsPhase) run(ctx context.Context, t *tort) error {
	if t.c.kills == 0 {
		return nil
	}
	return t.kills(ctx)
}

// kills SIGKILLs child benches at random instants, rotating through the
// modes, then verifies each mode's keyspace.
func (t *tort) kills(ctx context.Context) error {
	r := row{phase: "client SIGKILL", failed: "n/a (killed)"}
	kss := map[string]string{}
	for _, m := range t.c.modes {
		ks, err := t.keyspace(ctx, m)
		if err != nil {
			return err
		}
		kss[m] = ks
	}
	for i := range t.c.kills {
		m := t.c.modes[i%len(t.c.modes)]
		ack := filepath.Join(t.c.dir, "acks-"+m+".log")
		c, err := t.startBench(kss[m], m, smallLoad, ack, fmt.Sprintf("kill-%03d-%s", i, m))
		if err != nil {
			return err
		}
		// A random instant: during the connect and actualization, or
		// later under load.
		d := time.Duration(300+t.rng.IntN(4700)) * time.Millisecond
		select {
		case <-time.After(d):
		case <-c.done:
			return fmt.Errorf("bench %s ended before it was killed: %w", m, c.exited())
		case <-ctx.Done():
			c.kill()
			return ctx.Err()
		}
		c.kill()
		t.mark("kill "+m, c.exitedAt, c.exitedAt)
		r.faults++
		if (i+1)%10 == 0 {
			t.logf("kills: %d of %d", i+1, t.c.kills)
		}
	}
	// Recovery: a fresh child on each keyspace acknowledges again; then
	// every acknowledgement of the phase is verified.
	for _, m := range t.c.modes {
		ack := filepath.Join(t.c.dir, "acks-"+m+".log")
		n := countAcks(ack)
		began := time.Now()
		c, err := t.startBench(kss[m], m, smallLoad, ack, "kill-recovery-"+m)
		if err != nil {
			return err
		}
		_, werr := waitAcks(ctx, c, n, 3*time.Minute)
		r.recovery = max(r.recovery, time.Since(began))
		c.kill()
		if werr != nil {
			return fmt.Errorf("mode %s after the kills: %w", m, werr)
		}
		r.acked += countAcks(ack)
		if err := t.verify(ctx, kss[m], ack, smallLoad.partitions, &r); err != nil {
			return err
		}
	}
	r.note = fmt.Sprintf("%d modes, kill after 0.3-5 s; recovery = a new process's first ack", len(t.c.modes))
	t.rows = append(t.rows, r)
	return nil
}
