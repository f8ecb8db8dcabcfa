package plog

import (
	"context"
	"time"

	"github.com/cqlseq/cqlseq/storage"
)

// Retries of the record Puts that follow durable events (fenced, trust1):
// the same rows again are idempotent, while giving up leaves the events
// without their records; so a transient failure is retried a few times
// within ctx.
const (
	putAttempts   = 5
	putFirstDelay = 10 * time.Millisecond
)

// putIdempotent writes rows with PutBatch, stamped with one new version of
// v (one logical write, so every retry carries the same), retrying
// failures (at most putAttempts calls, backing off from putFirstDelay)
// while ctx allows. It returns the last error.
func putIdempotent(ctx context.Context, st storage.Storage, v *storage.Versions, rows []storage.Row) error {
	if err := v.Stamp(ctx, rows); err != nil {
		return err
	}
	delay := putFirstDelay
	var err error
	for attempt := 1; ; attempt++ {
		if err = st.PutBatch(ctx, rows); err == nil || attempt == putAttempts || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay *= 2
	}
}
