package main

import (
	"context"
	"errors"
	"time"

	"github.com/cqlseq/cqlseq/testenv/cassandra"
	"github.com/cqlseq/cqlseq/testenv/torture"
)

// restartNode SIGKILLs node i and starts it again after down, saving the
// state file at once (so that cluster-down stops the new process even if
// waiting for the ring then fails or is interrupted), then waits until
// every node is up and normal.
func (t *tort) restartNode(ctx context.Context, i int, down time.Duration) error {
	inst, err := t.cluster.Node(i)
	if err != nil {
		return err
	}
	err = cassandra.Restart(ctx, inst, t.opts, down)
	t.saveState()
	if err != nil {
		return err
	}
	return cassandra.WaitRing(ctx, t.cluster, t.opts.StartTimeout)
}

// pauseNode SIGSTOPs node for d (or until ctx is done) and always resumes
// it before returning.
func (t *tort) pauseNode(ctx context.Context, node int, d time.Duration) (torture.Fault, error) {
	f := torture.Fault{Began: time.Now()}
	if err := cassandra.PauseNode(t.cluster, node); err != nil {
		return f, err
	}
	serr := sleep(ctx, d)
	rerr := cassandra.ResumeNode(t.cluster, node)
	f.Ended = time.Now()
	return f, errors.Join(serr, rerr)
}

// saveState rewrites the launcher's state file after a restart changed a
// node's pid, so that cluster-down stops the new processes.
func (t *tort) saveState() {
	if t.c.state == "" {
		return
	}
	if err := cassandra.WriteClusterState(t.c.state, t.cluster); err != nil {
		t.logf("saving %s: %v", t.c.state, err)
	}
}

// cleanupCluster undoes what an interrupted or killed campaign may have
// left on the cluster of -state: its iptables rules and paused nodes.
func (t *tort) cleanupCluster() error {
	if t.cluster == nil {
		return errors.New("-cleanup needs -state")
	}
	var errs []error
	if len(t.cluster.Nodes) >= 3 {
		n, err := removeTaggedRules(t.ruleTag())
		if err != nil {
			errs = append(errs, err)
		}
		if n > 0 {
			t.logf("cleanup: removed %d iptables rules (%s)", n, t.ruleTag())
		}
	}
	for i := range t.cluster.Nodes {
		if inst := t.cluster.Nodes[i]; inst.Running() {
			if err := cassandra.ResumeNode(t.cluster, i+1); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
