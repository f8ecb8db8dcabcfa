package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
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
	if err := t.partitionReady(); err != nil {
		return err
	}
	return t.forFaultModes(ctx, t.partition)
}

// partitionReady fails, naming what is missing, when the partition phase
// cannot cut node 3 off: it cuts the network with iptables or fails (a
// paused node is another fault, which node_pause covers already).
func (t *tort) partitionReady() error {
	dir := t.cluster.Nodes[2].Dir
	return partitionCutError(storagePort(dir), filepath.Join(dir, "cassandra.yaml"), iptablesError())
}

// partitionCutError is the partition phase's decision: nil when it can cut
// node 3's storage port (port > 0) with a working iptables (ipt nil), else
// an error that says what is missing.
func partitionCutError(port int, yaml string, ipt error) error {
	var errs []error
	if port <= 0 {
		errs = append(errs, fmt.Errorf("node 3's storage port is unknown (no storage_port in %s)", yaml))
	}
	if ipt != nil {
		errs = append(errs, fmt.Errorf("%w; the phase cuts the network with iptables and needs it, as root (Debian: apt-get install iptables)", ipt))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("partition: cannot cut node 3 off: %w (or leave the phase out: -phases, -node-faults 0)", errors.Join(errs...))
}

// partition cuts node 3 from nodes 1 and 2 on the cluster's storage port
// with iptables (partitionReady checked that it can).
func (t *tort) partition(ctx context.Context, mode string) error {
	port := storagePort(t.cluster.Nodes[2].Dir)
	rules := partitionRules(port, t.ruleTag())
	r, err := t.rated(ctx, "partition", mode, t.c.nodeFaults, degradedTargets, func(ctx context.Context, i int) (torture.Fault, string, error) {
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
		r.note = fmt.Sprintf("iptables DROP of the storage-port traffic to node 3 (one-way: see partitionRules), %v", t.c.cut)
	}
	return err
}
