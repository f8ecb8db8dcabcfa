package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// skewPhase runs successive owners of one keyspace (bench processes one
// after another, each SIGKILLed after a while) whose store clocks
// (cql.Options.Now, bench --clock-offset) disagree by up to 30 s either
// way, and one owner whose clock steps back mid-run, in every -skew-modes
// mode; then verify --acks over every acknowledgement of the keyspace.
// A later owner runs long enough that its clock passes an earlier owner's
// timestamps during its run, over thousands of workspaces, so that some
// workspace's number cell is written only early in a run while later
// flushes of other workspaces go on: in the trust modes a number cell
// shadowed by an earlier owner's later timestamp must not make the next
// owner issue a number twice.
type skewPhase struct{}

func (skewPhase) name() string { return "skew" }

// skewOwner is one owner of a skew scenario: its clock offset, a step
// back after stepAfter of its run, and how long it runs after its first
// acknowledgement.
type skewOwner struct {
	offset, stepBack, stepAfter, run time.Duration
}

// skewScenario is a sequence of owners on a keyspace of its own.
type skewScenario struct {
	name   string
	owners []skewOwner
}

// skewScenarios are the full campaign's, or with -short the CI's.
func skewScenarios(short bool) []skewScenario {
	if short {
		return []skewScenario{
			{"ahead3", []skewOwner{{offset: 3 * time.Second, run: 5 * time.Second}, {run: 7 * time.Second}, {run: 4 * time.Second}}},
			{"stepback", []skewOwner{{stepBack: 5 * time.Second, stepAfter: 4 * time.Second, run: 12 * time.Second}, {run: 4 * time.Second}}},
		}
	}
	return []skewScenario{
		{"ahead3", []skewOwner{{offset: 3 * time.Second, run: 10 * time.Second}, {run: 12 * time.Second}, {run: 8 * time.Second}}},
		{"pm30", []skewOwner{{offset: 30 * time.Second, run: 8 * time.Second}, {offset: -30 * time.Second, run: 12 * time.Second},
			{run: 40 * time.Second}, {run: 8 * time.Second}}},
		{"stepback", []skewOwner{{stepBack: 10 * time.Second, stepAfter: 8 * time.Second, run: 24 * time.Second}, {run: 8 * time.Second}}},
	}
}

func (skewPhase) run(ctx context.Context, t *tort) error {
	if len(t.c.skewModes) == 0 {
		return nil
	}
	for _, sc := range skewScenarios(t.c.short) {
		for _, mode := range t.c.skewModes {
			if t.c.short && sc.name == "stepback" && mode != t.c.skewModes[0] {
				continue // the CI run steps one mode's clock back
			}
			if err := t.skew(ctx, sc, mode); err != nil {
				return err
			}
		}
	}
	return nil
}

// skew runs one scenario in mode on a keyspace of its own and verifies it.
func (t *tort) skew(ctx context.Context, sc skewScenario, mode string) error {
	tag := "skew_" + sc.name + "_" + mode
	ks, err := t.keyspace(ctx, tag)
	if err != nil {
		return err
	}
	ld := nemesisLoad
	nm := &nemesis{}
	r := row{phase: fmt.Sprintf("clock skew %s (%s)", sc.name, mode), failed: "n/a (killed)", nem: nm}
	var cs []*child
	var clocks []string
	lo, hi := time.Duration(0), time.Duration(0)
	for i, so := range sc.owners {
		o := owner{tag: fmt.Sprintf("%s-%d", tag, i+1), mode: mode, run: so.run,
			extra: clockArgs(so.offset, so.stepBack, so.stepAfter)}
		desc := fmtOffset(so.offset)
		if so.stepBack > 0 {
			desc += fmt.Sprintf(", back %v after %v", so.stepBack, so.stepAfter)
		}
		clocks = append(clocks, desc)
		lo, hi = min(lo, so.offset, so.offset-so.stepBack), max(hi, so.offset)
		t.logf("%s: owner %d of %d, clock %s, %v of load", tag, i+1, len(sc.owners), desc, so.run)
		c, err := t.startOwner(ks, ld, o)
		if err != nil {
			return err
		}
		cs = append(cs, c)
		if err := t.runOwner(ctx, c, o, true, nm); err != nil {
			return fmt.Errorf("skew: %w", err)
		}
		r.faults++
		if _, err := scanOwner(c, nm); err != nil {
			return err
		}
	}
	nm.skew = fmt.Sprintf("%s..%s", fmtOffset(lo), fmtOffset(hi))
	r.note = "owners' clocks in turn: " + strings.Join(clocks, "; ") + "; each SIGKILLed"
	return t.verifyOwners(ctx, ks, ld, cs, &r)
}
