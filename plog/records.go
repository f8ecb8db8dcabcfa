package plog

import (
	"context"
	"time"

	"github.com/cqlseq/cqlseq/storage"
)

// Retries of record Puts that follow durable events: the Put is idempotent
// (the same rows again), and giving up leaves the events without their
// records, so a transient failure is retried a few times within ctx.
const (
	recordPutAttempts   = 5
	recordPutFirstDelay = 10 * time.Millisecond
)

// putRecords writes record rows whose events are already durable with
// PutBatch, retrying failures (at most recordPutAttempts calls, backing off
// from recordPutFirstDelay) while ctx allows. It returns the last error.
func putRecords(ctx context.Context, st storage.Storage, rows []storage.Row) error {
	delay := recordPutFirstDelay
	var err error
	for attempt := 1; ; attempt++ {
		if err = st.PutBatch(ctx, rows); err == nil || attempt == recordPutAttempts || ctx.Err() != nil {
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
