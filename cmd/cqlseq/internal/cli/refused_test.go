package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/metrics"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// TestRefusedCommandStopsTheRun: issue 20 item 9. A role without MODIFY
// permission made every event write fail with "no MODIFY permission"; bench
// counted the errors and ran its whole duration (then exited 0). A refused
// write (storage.ErrAuthorization, and likewise ErrAuthentication and
// ErrTLS) now stops every worker at once, reported as stopped. The run's
// duration is an hour: only the stop ends it (the test's own one-minute
// context is a bound only the old behaviour reaches).
func TestRefusedCommandStopsTheRun(t *testing.T) {
	for _, refusal := range []error{storage.ErrAuthorization, storage.ErrAuthentication, storage.ErrTLS} {
		t.Run(refusal.Error(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			inner := mem.New(mem.Options{})
			defer inner.Close()
			fs, err := faulty.New(inner, faulty.Options{})
			require.NoError(t, err)
			mc, err := metrics.New(prometheus.NewRegistry())
			require.NoError(t, err)
			parts, _, err := openPartitions(ctx, openConfig{st: fs, app: 1, partitions: 2, mode: plog.ModeTrust0, mc: mc,
				log: slog.New(slog.DiscardHandler), maxUnflushed: 500, readyTimeout: time.Minute})
			require.NoError(t, err)
			defer func() { _ = parts.close() }()
			denied := fmt.Errorf("no MODIFY permission on <table cqlseq.values>: %w", refusal)
			require.NoError(t, fs.SetRules(faulty.Rule{Action: faulty.Fail, Err: denied,
				Ops: []string{faulty.OpPut, faulty.OpPutBatch, faulty.OpInsertIfNotExists, faulty.OpCompareAndSwap, faulty.OpApplyBatchIf, faulty.OpApplyBatchesIf}}))

			res := runCommands(ctx, parts.parts, loadConfig{partitions: 2, workspaces: 4, concurrency: 2, duration: time.Hour})
			require.NoError(t, ctx.Err(), "the run went on after a refused command")
			require.ErrorIs(t, res.stopped, refusal)
			assert.Zero(t, res.commands)
			err = benchOutcome(context.Background(), &res, &benchReport{})
			require.ErrorIs(t, err, refusal)
			assert.Contains(t, err.Error(), "the sequencer run stopped: partition ")
		})
	}
}

// TestBenchOutcome: a run in which no command succeeded and commands
// failed is a failure (it exited 0); one command is enough for success.
func TestBenchOutcome(t *testing.T) {
	bg := context.Background()
	first := errors.New("partition 0: apppart: event write failed: boom")
	err := benchOutcome(bg, &loadResult{errors: 3996, busy: 27120, firstErr: first}, &benchReport{})
	require.ErrorIs(t, err, first)
	assert.Equal(t, "no command succeeded, 3,996 failed; the first: partition 0: apppart: event write failed: boom", err.Error())
	assert.NoError(t, benchOutcome(bg, &loadResult{commands: 1, errors: 3996, firstErr: first}, &benchReport{}))
	assert.NoError(t, benchOutcome(bg, &loadResult{}, &benchReport{}), "nothing failed")
	stopped := errors.New("partition 1: stopped")
	assert.ErrorIs(t, benchOutcome(bg, &loadResult{commands: 5, stopped: stopped}, &benchReport{}), stopped)
}
