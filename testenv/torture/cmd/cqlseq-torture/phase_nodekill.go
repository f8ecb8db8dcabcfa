package main

import (
	"context"
	"fmt"
	"time"

	"github.com/cqlseq/cqlseq/testenv/torture"
)

// nodeKillPhase SIGKILLs a node under load and restarts it, in every
// -fault-modes mode.
type nodeKillPhase struct{}

func (nodeKillPhase) name() string { return "node_kill" }

func (nodeKillPhase) run(ctx context.Context, t *tort) error {
	if ok, err := t.nodeFaulter("node_kill"); !ok {
		return err
	}
	return t.forFaultModes(ctx, t.nodeKill)
}

func (t *tort) nodeKill(ctx context.Context, mode string) error {
	_, err := t.rated(ctx, "node_kill", mode, t.c.nodeFaults, killTargets, func(ctx context.Context, i int) (torture.Fault, string, error) {
		node := 1 + t.rng.IntN(3)
		t.logf("node_kill %s #%d: SIGKILL node %d, down 5 s, restart", mode, i+1, node)
		f := torture.Fault{Began: time.Now()}
		if err := t.restartNode(ctx, node, 5*time.Second); err != nil {
			return f, "", err
		}
		f.Ended = time.Now()
		return f, fmt.Sprintf("node %d", node), nil
	})
	return err
}
