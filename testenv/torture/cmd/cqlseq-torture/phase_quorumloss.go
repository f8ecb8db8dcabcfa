package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

// quorumLossPhase SIGKILLs two of three nodes under load.
type quorumLossPhase struct{}

func (quorumLossPhase) name() string { return "quorum_loss" }

func (quorumLossPhase) run(ctx context.Context, t *tort) error {
	if ok, err := t.nodeFaulter("quorum_loss"); !ok {
		return err
	}
	return t.quorumLoss(ctx)
}

// quorumLoss kills two of the three nodes: after the commands in flight
// have ended (the request timeout), no command may be acknowledged until
// they are back.
func (t *tort) quorumLoss(ctx context.Context) error {
	err := t.underLoad(ctx, "quorum_loss", "trust2", t.c.nodeFaults, func(ctx context.Context, i int, c *child, r *row) error {
		keep := 1 + t.rng.IntN(3)
		var down []int
		for n := 1; n <= 3; n++ {
			if n != keep {
				down = append(down, n)
			}
		}
		t.logf("quorum_loss #%d: SIGKILL nodes %v", i+1, down)
		for _, n := range down {
			if err := cassandra.KillNode(t.cluster, n); err != nil {
				return err
			}
		}
		if err := sleep(ctx, t.c.timeout+2*time.Second); err != nil { // commands in flight end
			return err
		}
		before := countAcks(c.ackLog)
		if err := sleep(ctx, 10*time.Second); err != nil {
			return err
		}
		if got := countAcks(c.ackLog) - before; got > 0 {
			t.failed = true
			r.note = fmt.Sprintf("%d commands acknowledged without a quorum", got)
			t.logf("quorum_loss: FAILED: %s", r.note)
		}
		for _, n := range down {
			err := cassandra.Restart(ctx, t.cluster.Nodes[n-1], t.opts, 0)
			t.saveState()
			if err != nil {
				return err
			}
		}
		if err := cassandra.WaitRing(ctx, t.cluster, t.opts.StartTimeout); err != nil {
			return err
		}
		return recovered(ctx, c, r)
	})
	if err == nil && len(t.rows) > 0 && t.rows[len(t.rows)-1].note == "" {
		t.rows[len(t.rows)-1].note = "0 acks in the 10 s without quorum (after the request timeout)"
	}
	return err
}
