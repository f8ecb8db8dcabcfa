package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A child that stops before its first acknowledgement is a stopped run,
// unless it had to acknowledge: then the phase cannot go on.
func TestRunOwnerCountsAChildThatStops(t *testing.T) {
	dir := t.TempDir()
	tt := &tort{c: config{dir: dir}}
	for _, mustAck := range []bool{false, true} {
		c, err := startChild(dir, "owner", "/bin/sh", "-c", `echo "cqlseq: the sequencer run stopped: conflict" >&2; exit 1`)
		require.NoError(t, err)
		c.ackLog = filepath.Join(dir, "acks.log")
		var nm nemesis
		err = tt.runOwner(context.Background(), c, owner{tag: "owner", run: time.Hour}, mustAck, &nm)
		require.Equal(t, 1, nm.runs)
		if mustAck {
			require.ErrorContains(t, err, "the sequencer run stopped: conflict")
			continue
		}
		require.NoError(t, err)
		require.Equal(t, 1, nm.exits)
	}
}

// An owner that runs until an instant already past is killed half a
// second after its first acknowledgement.
func TestRunOwnerUntilAPastInstant(t *testing.T) {
	dir := t.TempDir()
	ack := filepath.Join(dir, "acks.log")
	c, err := startChild(dir, "owner", "/bin/sh", "-c", `printf '0 1 1 1:1,2:1\n' > `+ack+`; sleep 60`)
	require.NoError(t, err)
	c.ackLog = ack
	var nm nemesis
	began := time.Now()
	err = (&tort{}).runOwner(context.Background(), c, owner{tag: "owner", until: time.Now().Add(-time.Minute)}, true, &nm)
	require.NoError(t, err)
	require.Less(t, time.Since(began), 10*time.Second)
	require.Zero(t, nm.exits)
	require.Error(t, c.exited(), "killed")
}
