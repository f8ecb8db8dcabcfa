package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A child that exits while the campaign waits for its first
// acknowledgement ends the wait at once, with its stderr's last line,
// not after the wait's limit.
func TestWaitAcksEndsWhenTheChildExits(t *testing.T) {
	dir := t.TempDir()
	c, err := startChild(dir, "bench-a", "/bin/sh", "-c", `echo report; echo "first" >&2; echo "cqlseq: new epoch: storage: unavailable" >&2; exit 1`)
	require.NoError(t, err)
	c.ackLog = filepath.Join(dir, "acks.log")
	defer c.stop()
	began := time.Now()
	_, err = waitAcks(context.Background(), c, 0, time.Minute)
	require.Error(t, err)
	require.Less(t, time.Since(began), 10*time.Second)
	require.Contains(t, err.Error(), "bench-a exited (exit status 1): cqlseq: new epoch: storage: unavailable")
	require.NotContains(t, err.Error(), "first")
}

// A child that runs and acknowledges nothing is waited for until the limit.
func TestWaitAcksGivesUpAfterTheLimit(t *testing.T) {
	dir := t.TempDir()
	c, err := startChild(dir, "bench-b", "/bin/sh", "-c", "sleep 60")
	require.NoError(t, err)
	c.ackLog = filepath.Join(dir, "acks.log")
	defer c.stop()
	_, err = waitAcks(context.Background(), c, 0, 300*time.Millisecond)
	require.ErrorContains(t, err, "no acknowledged command within 300ms")
	require.NoError(t, c.exited())
}
