package main

import (
	"context"
	"fmt"

	"github.com/cqlseq/cqlseq/testenv/torture"
)

// nodePausePhase SIGSTOPs a node under load for -pause, in every
// -fault-modes mode.
type nodePausePhase struct{}

func (nodePausePhase) name() string { return "node_pause" }

func (nodePausePhase) run(ctx context.Context, t *tort) error {
	if ok, err := t.nodeFaulter("node_pause"); !ok {
		return err
	}
	return t.forFaultModes(ctx, t.nodePause)
}

func (t *tort) nodePause(ctx context.Context, mode string) error {
	_, err := t.rated(ctx, "node_pause", mode, t.c.nodeFaults, degradedTargets, func(ctx context.Context, i int) (torture.Fault, string, error) {
		node := 1 + t.rng.IntN(3)
		t.logf("node_pause %s #%d: SIGSTOP node %d for %v", mode, i+1, node, t.c.pause)
		f, err := t.pauseNode(ctx, node, t.c.pause)
		return f, fmt.Sprintf("node %d", node), err
	})
	return err
}
