package cli

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
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

// openFenced opens two fenced partitions over a faulty mem store whose
// conditional writes fail as rules say.
func openFenced(t *testing.T, readyTimeout time.Duration, rules ...faulty.Rule) (*faulty.Store, *syncBuffer, *partitionSet, time.Duration, error) {
	t.Helper()
	inner := mem.New(mem.Options{})
	t.Cleanup(func() { _ = inner.Close() })
	fs, err := faulty.New(inner, faulty.Options{Rules: rules})
	require.NoError(t, err)
	mc, err := metrics.New(prometheus.NewRegistry())
	require.NoError(t, err)
	logs := &syncBuffer{}
	began := time.Now()
	parts, _, err := openPartitions(context.Background(), openConfig{st: fs, app: 1, partitions: 2, mode: plog.ModeFenced, mc: mc,
		log: slog.New(slog.NewTextHandler(logs, nil)), maxUnflushed: 500, readyTimeout: readyTimeout})
	if parts != nil {
		t.Cleanup(func() { _ = parts.close() })
	}
	return fs, logs, parts, time.Since(began), err
}

var conditionalOps = []string{faulty.OpInsertIfNotExists, faulty.OpCompareAndSwap, faulty.OpApplyBatchIf}

// A takeover that meets a transient unavailability ("Cannot achieve
// consistency level LOCAL_SERIAL") or an unknown outcome is retried within
// --ready-timeout, each retry logged; the partitions open.
func TestOpenRetriesTransientErrors(t *testing.T) {
	for _, werr := range []error{storage.ErrUnavailable, storage.ErrUnknownOutcome} {
		t.Run(werr.Error(), func(t *testing.T) {
			fail := fmt.Errorf("insert if not exists: %w: Cannot achieve consistency level LOCAL_SERIAL", werr)
			fs, logs, parts, _, err := openFenced(t, time.Minute, faulty.Rule{Ops: conditionalOps, Action: faulty.Fail, Err: fail, Times: 3})
			require.NoError(t, err)
			require.Len(t, parts.parts, 2)
			assert.Equal(t, uint64(3), fs.Injected())
			assert.Equal(t, 3, strings.Count(logs.String(), "failed, retrying"), logs.String())
		})
	}
}

// Any other error fails the open at once, not retried.
func TestOpenDoesNotRetryOtherErrors(t *testing.T) {
	denied := fmt.Errorf("no MODIFY permission: %w", storage.ErrAuthorization)
	fs, logs, _, took, err := openFenced(t, time.Minute, faulty.Rule{Ops: conditionalOps, Action: faulty.Fail, Err: denied})
	require.ErrorIs(t, err, storage.ErrAuthorization)
	assert.Equal(t, uint64(1), fs.Injected())
	assert.NotContains(t, logs.String(), "retrying")
	assert.Less(t, took, 10*time.Second)
}

// An unavailability that outlasts --ready-timeout fails the open with it.
func TestOpenGivesUpAfterTheReadyTimeout(t *testing.T) {
	fs, _, _, took, err := openFenced(t, 700*time.Millisecond, faulty.Rule{Ops: conditionalOps, Action: faulty.Fail})
	require.ErrorIs(t, err, storage.ErrUnavailable)
	require.ErrorContains(t, err, "gave up after")
	assert.GreaterOrEqual(t, took, 700*time.Millisecond)
	assert.Less(t, took, 10*time.Second)
	assert.Greater(t, fs.Injected(), uint64(2))
}
