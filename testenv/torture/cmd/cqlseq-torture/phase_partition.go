package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cqlseq/cqlseq/testenv/torture"
)

// partitionPhase cuts node 3 off under load, in every -fault-modes mode.
type partitionPhase struct{}

func (partitionPhase) name() string { return "partition" }

func (partitionPhase) run(ctx context.Context, t *tort) error {
	if ok, err := t.nodeFaulter("partition"); !ok {
		return err
	}
	return t.forFaultModes(ctx, t.partition)
}

// partition cuts node 3 from nodes 1 and 2 on the cluster's storage port
// with iptables, or pauses it when iptables does not work.
func (t *tort) partition(ctx context.Context, mode string) error {
	port := storagePort(t.cluster.Nodes[2].Dir)
	rules := partitionRules(port, t.ruleTag())
	useIPT := port > 0 && iptablesWorks()
	if !useIPT {
		t.logf("partition: iptables does not work here; SIGSTOP of node 3 stands in for the partition")
	}
	r, err := t.rated(ctx, "partition", mode, t.c.nodeFaults, degradedTargets, func(ctx context.Context, i int) (torture.Fault, string, error) {
		if !useIPT {
			f, err := t.pauseNode(ctx, 3, t.c.cut)
			return f, "node 3 paused", err
		}
		t.logf("partition %s #%d: node 3 cut from nodes 1 and 2 (storage port %d) for %v", mode, i+1, port, t.c.cut)
		f := torture.Fault{Began: time.Now()}
		added, err := addRules(rules)
		if err == nil {
			err = sleep(ctx, t.c.cut)
		}
		if derr := deleteRules(added); derr != nil {
			t.logf("partition: REMOVING RULES FAILED: %v", derr)
			err = errors.Join(err, derr)
		}
		f.Ended = time.Now()
		return f, "node 3 cut", err
	})
	if err == nil {
		if useIPT {
			r.note = fmt.Sprintf("iptables DROP of the storage-port traffic to node 3 (one-way: see partitionRules), %v", t.c.cut)
		} else {
			r.note = fmt.Sprintf("iptables unusable: node 3 SIGSTOPped %v instead", t.c.cut)
		}
	}
	return err
}
