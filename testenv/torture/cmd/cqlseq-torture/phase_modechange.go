package main

import (
	"context"
	"fmt"
	"strings"
)

// modeChangePhase changes the mode of one keyspace trust0 -> trust2 ->
// fenced, -modechange-runs bench processes per mode, each SIGKILLed after
// -modechange-run of load while conditional writes are in flight (a short
// -lwt-attempt-timeout makes some outcomes unknown); verify --acks after
// the last over every acknowledgement of the phase.
type modeChangePhase struct{}

func (modeChangePhase) name() string { return "modechange" }

func (modeChangePhase) run(ctx context.Context, t *tort) error {
	if t.c.modeChangeRuns == 0 {
		return nil
	}
	return t.modeChange(ctx)
}

// modeChangeModes is the order the phase changes modes in.
var modeChangeModes = []string{"trust0", "trust2", "fenced"}

func (t *tort) modeChange(ctx context.Context) error {
	ks, err := t.keyspace(ctx, "modechange")
	if err != nil {
		return err
	}
	ld := nemesisLoad
	nm := &nemesis{skew: "none"}
	r := row{phase: "mode changes " + strings.Join(modeChangeModes, " -> "), failed: "n/a (killed)", nem: nm}
	var cs []*child
	for _, mode := range modeChangeModes {
		for i := range t.c.modeChangeRuns {
			o := owner{tag: fmt.Sprintf("modechange-%s-%d", mode, i+1), mode: mode, run: t.c.modeChangeRun, extra: t.lwtArgs()}
			t.logf("modechange: %s run %d of %d, SIGKILL after %v of load", mode, i+1, t.c.modeChangeRuns, o.run)
			c, err := t.startOwner(ks, ld, o)
			if err != nil {
				return err
			}
			cs = append(cs, c)
			if err := t.runOwner(ctx, c, o, false, nm); err != nil {
				return fmt.Errorf("modechange: %w", err)
			}
			if i == 0 && len(cs) > 1 {
				t.mark("mode "+mode, c.started, c.started)
			}
			t.mark("kill", c.exitedAt, c.exitedAt)
			r.faults++
			if _, err := scanOwner(c, nm); err != nil {
				return err
			}
		}
	}
	r.note = fmt.Sprintf("%d runs per mode, each SIGKILLed under load, %s LWT attempts", t.c.modeChangeRuns, t.lwtArgs()[1])
	return t.verifyOwners(ctx, ks, ld, cs, &r)
}
