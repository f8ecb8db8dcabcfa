package main

import (
	"context"
	"fmt"

	"github.com/cqlseq/cqlseq/testenv/torture"
)

// contestedPhase runs contested fenced takeovers: round after round, two
// bench processes open the same partitions at once on one keyspace, with
// a conditional write's attempt so short (-lwt-attempt-timeout) that some
// outcomes are unknown, the epoch's compare-and-swap among them; in the
// full campaign (3 nodes, not -short) one node is SIGSTOPped while the
// owners take over, then resumed. Each round's owners are SIGKILLed after
// -contest-round. Then verify --acks over every acknowledgement of the
// phase, and no epoch of a partition may have been taken by both owners
// of a round (torture.SharedEpochs).
type contestedPhase struct{}

// contestLoad is the contested phase's: many partitions, each a takeover
// that the two owners race for.
var contestLoad = load{partitions: 8, concurrency: 2, workspaces: 4000}

func (contestedPhase) name() string { return "contested" }

func (contestedPhase) run(ctx context.Context, t *tort) error {
	if t.c.contestRounds == 0 {
		return nil
	}
	return t.contested(ctx)
}

func (t *tort) contested(ctx context.Context) error {
	const mode = "fenced"
	ks, err := t.keyspace(ctx, "contested")
	if err != nil {
		return err
	}
	pause := t.cluster != nil && len(t.cluster.Nodes) >= 3 && !t.c.short
	ld := contestLoad
	nm := &nemesis{skew: "none"}
	r := row{phase: "contested takeovers (fenced)", failed: "n/a (killed)", nem: nm}
	var cs []*child
	var shared []string
	paused := 0
	for i := range t.c.contestRounds {
		var owners [2]owner
		var kids [2]*child
		for j, name := range []string{"a", "b"} {
			owners[j] = owner{tag: fmt.Sprintf("contested-%d-%s", i+1, name), mode: mode, run: t.c.contestRound, extra: t.lwtArgs()}
			c, err := t.startOwner(ks, ld, owners[j])
			if err != nil {
				return err
			}
			defer c.stop()
			kids[j] = c
			cs = append(cs, c)
		}
		var fault chan error
		var pf torture.Fault // the pause, once fault has answered
		pauseLabel := ""
		t.mark(fmt.Sprintf("takeover #%d", i+1), kids[0].started, kids[1].started)
		if pause {
			node := 1 + t.rng.IntN(3)
			t.logf("contested #%d: two owners take over at once, node %d SIGSTOPped for %v", i+1, node, t.c.contestPause)
			fault = make(chan error, 1)
			pauseLabel = fmt.Sprintf("node %d paused", node)
			go func() {
				var err error
				pf, err = t.pauseNode(ctx, node, t.c.contestPause)
				fault <- err
			}()
			paused++
		} else {
			t.logf("contested #%d: two owners take over at once", i+1)
		}
		// The owners run at once, each counting into its own nemesis.
		var sub [2]nemesis
		errs := make(chan error, 2)
		for j := range kids {
			go func() { errs <- t.runOwner(ctx, kids[j], owners[j], false, &sub[j]) }()
		}
		for range kids {
			if err := <-errs; err != nil {
				return err
			}
		}
		for _, s := range sub {
			nm.runs += s.runs
			nm.exits += s.exits
		}
		if fault != nil {
			if err := <-fault; err != nil {
				return fmt.Errorf("contested #%d: pausing a node: %w", i+1, err)
			}
			t.mark(pauseLabel, pf.Began, pf.Ended)
		}
		r.faults++
		var tk [2][]torture.TakeoverLog
		for j, c := range kids {
			if tk[j], err = scanOwner(c, nm); err != nil {
				return err
			}
		}
		nm.contested += torture.ContestedPartitions(tk[0], tk[1])
		for _, s := range torture.SharedEpochs(tk[0], tk[1]) {
			shared = append(shared, fmt.Sprintf("round %d partition %d epoch %d", i+1, s.Partition, s.Epoch))
		}
	}
	nm.shared = len(shared)
	r.note = fmt.Sprintf("%d rounds of two owners opening %d partitions at once, %s", t.c.contestRounds, ld.partitions, t.lwtArgs()[1]+" LWT attempts")
	if pause {
		r.note += fmt.Sprintf(", a node SIGSTOPped %v at each takeover (%d)", t.c.contestPause, paused)
	}
	if len(shared) > 0 {
		t.failed = true
		r.note += fmt.Sprintf("; FENCING FAILED: %d epochs taken by both owners, first: %s", len(shared), shared[0])
		for _, s := range shared[:min(len(shared), 20)] {
			t.logf("contested: FAILED: an epoch taken by both owners: %s", s)
		}
	}
	return t.verifyOwners(ctx, ks, ld, cs, &r)
}
