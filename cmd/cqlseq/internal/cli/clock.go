package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// clockFlags skew the CQL store's wall clock (cql.Options.Now), which
// stamps its unversioned writes: the fault campaign runs owners whose
// clocks disagree. Hidden from help.
type clockFlags struct {
	offset    time.Duration
	stepBack  time.Duration
	stepAfter time.Duration
}

func (c *clockFlags) add(fs *pflag.FlagSet) {
	fs.DurationVar(&c.offset, "clock-offset", 0, "cql: the store's wall clock runs this far ahead of the machine's (negative: behind); testing only")
	fs.DurationVar(&c.stepBack, "clock-step-back", 0, "cql: the store's wall clock steps back this far --clock-step-after after the store is opened; testing only")
	fs.DurationVar(&c.stepAfter, "clock-step-after", 0, "cql: when --clock-step-back steps the clock back, from the store's open")
	for _, n := range []string{"clock-offset", "clock-step-back", "clock-step-after"} {
		_ = fs.MarkHidden(n)
	}
}

// set reports whether any clock flag is set.
func (c *clockFlags) set() bool { return c.offset != 0 || c.stepBack != 0 || c.stepAfter != 0 }

// validate reports every problem at once; the clock flags need the CQL
// store (bbolt's writes carry no timestamps).
func (c *clockFlags) validate(store string) []error {
	var errs []error
	if c.set() && store != storeCQL {
		errs = append(errs, fmt.Errorf("--clock-offset, --clock-step-back and --clock-step-after need --store %s (--store %s)", storeCQL, store))
	}
	if c.stepBack < 0 || c.stepAfter < 0 {
		errs = append(errs, fmt.Errorf("--clock-step-back %v, --clock-step-after %v: want >= 0", c.stepBack, c.stepAfter))
	}
	if (c.stepBack > 0) != (c.stepAfter > 0) {
		errs = append(errs, errors.New("--clock-step-back and --clock-step-after go together"))
	}
	return errs
}

// now returns the store's clock: the machine's plus --clock-offset, and
// from --clock-step-after after start on, minus --clock-step-back. nil
// when no flag is set (the store's default, time.Now).
func (c *clockFlags) now(start time.Time) func() time.Time {
	if !c.set() {
		return nil
	}
	offset, stepBack, stepAt := c.offset, c.stepBack, start.Add(c.stepAfter)
	return func() time.Time {
		now := time.Now()
		if stepBack > 0 && !now.Before(stepAt) {
			return now.Add(offset - stepBack)
		}
		return now.Add(offset)
	}
}
