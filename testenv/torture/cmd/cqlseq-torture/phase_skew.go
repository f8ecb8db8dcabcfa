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

// skewOwner is one owner of a skew scenario: its clock offset and a
// step back after stepAfter of its run. It runs run after its first
// acknowledgement or, with passBy > 0, until its clock has passed every
// earlier owner's last timestamps by passBy: a few hundred milliseconds of
// flushes (of the stored PLog offset among them) that win, after a
// shadowed stretch whose number cells lost to an earlier owner's.
type skewOwner struct {
	offset, stepBack, stepAfter time.Duration
	run, passBy                 time.Duration
}

// skewScenario is a sequence of owners on a keyspace of its own.
type skewScenario struct {
	name   string
	owners []skewOwner
}

// skewScenarios are the full campaign's, or with -short the CI's.
func skewScenarios(short bool) []skewScenario {
	const pass = 800 * time.Millisecond
	ahead3 := skewScenario{"ahead3", []skewOwner{{offset: 3 * time.Second, run: 6 * time.Second}, {passBy: pass}, {run: 6 * time.Second}}}
	stepback := skewScenario{"stepback", []skewOwner{{offset: 3 * time.Second, stepBack: 6 * time.Second, stepAfter: 3 * time.Second, run: 3 * time.Second},
		{passBy: pass}, {run: 6 * time.Second}}}
	if short {
		return []skewScenario{ahead3, stepback}
	}
	return []skewScenario{
		ahead3,
		{"pm30", []skewOwner{{offset: 30 * time.Second, run: 6 * time.Second}, {offset: -30 * time.Second, run: 6 * time.Second},
			{passBy: pass}, {run: 8 * time.Second}}},
		stepback,
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
	var lo, hi time.Duration
	// lastStamp bounds the timestamps of the owners so far: each one's
	// kill time on its own clock, before any step back.
	var lastStamp time.Time
	for i, so := range sc.owners {
		o := owner{tag: fmt.Sprintf("%s-%d", tag, i+1), mode: mode, run: so.run, extra: clockArgs(so.offset, so.stepBack, so.stepAfter)}
		desc := fmtOffset(so.offset)
		if so.stepBack > 0 {
			desc += fmt.Sprintf(", back %v after %v", so.stepBack, so.stepAfter)
		}
		if so.passBy > 0 {
			desc += fmt.Sprintf(", until %v past the earlier owners' timestamps", so.passBy)
		}
		clocks = append(clocks, desc)
		lo, hi = min(lo, so.offset, so.offset-so.stepBack), max(hi, so.offset)
		c, err := t.startOwner(ks, ld, o)
		if err != nil {
			return err
		}
		cs = append(cs, c)
		if so.passBy > 0 {
			// Until this clock (real + offset) passes lastStamp by passBy.
			o.until = lastStamp.Add(-so.offset + so.passBy)
			t.logf("%s: owner %d of %d, clock %s: SIGKILL at %s", tag, i+1, len(sc.owners), desc, o.until.Format("15:04:05.000"))
		} else {
			t.logf("%s: owner %d of %d, clock %s, %v of load", tag, i+1, len(sc.owners), desc, o.run)
		}
		// Only the first owner must acknowledge: a later one may stop on
		// what an earlier one left (trust0's record check).
		if err := t.runOwner(ctx, c, o, i == 0, nm); err != nil {
			return fmt.Errorf("skew: %w", err)
		}
		if so.offset != 0 || so.stepBack > 0 {
			// Shaded: the owners whose clock is off (the others run on the real clock).
			label := "clock " + fmtOffset(so.offset)
			if so.stepBack > 0 {
				label += fmt.Sprintf(", back %v", so.stepBack)
			}
			t.mark(label, c.started, c.exitedAt)
		}
		if k := time.Now().Add(so.offset); k.After(lastStamp) {
			lastStamp = k
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
