package appparttest

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleepRoundTripWaitsItsDelay(t *testing.T) {
	const d = 3 * time.Millisecond
	for i := 0; i < 5; i++ { // reuses a freed waiter
		began := time.Now()
		if err := sleepRoundTrip(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(began); got < d {
			t.Fatalf("waited %v, want at least %v", got, d)
		}
	}
}

func TestSleepRoundTripEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := sleepRoundTrip(ctx, time.Hour)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want %v", err, context.DeadlineExceeded)
	}
	if got := time.Since(began); got > 10*time.Second {
		t.Fatalf("returned after %v", got)
	}
	// A cancelled context before the wait: no wait at all.
	done, stop := context.WithCancel(context.Background())
	stop()
	if err := sleepRoundTrip(done, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want %v", err, context.Canceled)
	}
}
