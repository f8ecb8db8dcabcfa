package main

import (
	"context"
	"fmt"
	"strings"
)

// phase is one step of the campaign. run adds the phase's rows to t's
// table and marks t.failed when a check fails; it returns an error only
// when the phase could not be carried out (a child or node that did not
// come up, an interruption), which ends the campaign. A phase with nothing
// to do (its count 0, no cluster for its node faults) returns nil at once.
type phase interface {
	name() string
	run(ctx context.Context, t *tort) error
}

// phases are the campaign's phases in the order -phases lists them by
// default; gray is known but not in the default set.
var phases = []phase{
	killsPhase{}, nodeKillPhase{}, nodePausePhase{}, quorumLossPhase{}, partitionPhase{}, ownersPhase{},
	skewPhase{}, contestedPhase{}, modeChangePhase{}, latePhase{}, toolsPhase{}, restorePhase{}, servicePhase{},
}

// defaultPhases and knownPhases are -phases' default and accepted names.
var (
	defaultPhases = phaseNames(phases)
	knownPhases   = defaultPhases + "," + grayPhase{}.name()
)

func phaseNames(ps []phase) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.name()
	}
	return strings.Join(names, ",")
}

// phaseNamed returns the phase called name.
func phaseNamed(name string) (phase, bool) {
	for _, p := range append(phases, grayPhase{}) {
		if p.name() == name {
			return p, true
		}
	}
	return nil, false
}

// runPhases runs the -phases in order. Before each it waits until the
// cluster is whole again (waitWhole), so that no phase begins while a
// node the previous one faulted is still rejoining.
func (t *tort) runPhases(ctx context.Context) error {
	for _, name := range t.c.phases {
		p, ok := phaseNamed(name)
		if !ok {
			return fmt.Errorf("unknown phase %q", name)
		}
		if err := t.waitWhole(ctx, name); err != nil {
			return err
		}
		t.beginPhase(name)
		err := p.run(ctx, t)
		t.endPhase()
		if err != nil {
			return err
		}
	}
	return nil
}

// nodeFaulter reports whether a phase that faults nodes runs: not with
// -node-faults 0, not without a cluster (-state), and an error for a
// cluster of fewer than 3 nodes.
func (t *tort) nodeFaulter(name string) (bool, error) {
	if t.c.nodeFaults == 0 {
		return false, nil
	}
	return t.needsNodes(name)
}

// needsNodes reports whether the cluster of -state is there for a phase
// that faults nodes (false and a log line without one) and fails when it
// has fewer than 3 nodes.
func (t *tort) needsNodes(name string) (bool, error) {
	if t.cluster == nil {
		t.logf("%s: skipped (node faults need -state)", name)
		return false, nil
	}
	if len(t.cluster.Nodes) < 3 {
		return false, fmt.Errorf("%s needs 3 nodes, the cluster has %d", name, len(t.cluster.Nodes))
	}
	return true, nil
}

// forFaultModes runs phase once per -fault-modes mode.
func (t *tort) forFaultModes(ctx context.Context, phase func(ctx context.Context, mode string) error) error {
	for _, m := range t.c.faultModes {
		if err := phase(ctx, m); err != nil {
			return err
		}
	}
	return nil
}
