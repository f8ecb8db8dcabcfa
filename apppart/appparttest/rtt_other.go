//go:build !linux

package appparttest

import (
	"context"
	"time"
)

// sleepRoundTrip waits d, or until ctx ends, on a runtime timer (which may
// fire late on an idle process: see rtt_linux.go).
func sleepRoundTrip(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
