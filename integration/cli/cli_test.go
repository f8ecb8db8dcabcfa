// Package cli runs the cqlseq binary, built from this checkout, against the
// real test cluster: migrate, bench at trust0 and trust2 with a baseline and
// a JSON report, inspect, and verify (also on a planted duplicate).
package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage/cql"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }

func hostsFlag() []string { return []string{"--hosts", strings.Join(itest.Hosts(), ",")} }

// storeFlags select the test cluster's keyspace ks.
func storeFlags(ks string) []string {
	return append([]string{"--store", "cql", "--keyspace", ks}, hostsFlag()...)
}

func args(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestMigrate(t *testing.T) {
	itest.NoLeaks(t)
	s := itest.Session(t)
	ks := itest.UniqueName("cqlseq_cli_")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.Query("DROP KEYSPACE IF EXISTS " + ks).WithContext(ctx).Exec(); err != nil {
			t.Errorf("dropping %s: %v", ks, err)
		}
	})

	r := itest.RunCLI(t, args([]string{"migrate", "--keyspace", ks}, hostsFlag())...)
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Contains(t, r.Stdout, "keyspace "+ks)
	assert.Contains(t, r.Stdout, "("+itest.Engine()+")", "--engine auto finds the engine")
	assert.Contains(t, r.Stdout, "applied versions [0 1 2 3]")

	r = itest.RunCLI(t, args([]string{"migrate", "--keyspace", ks}, hostsFlag())...)
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Contains(t, r.Stdout, "is up to date")

	// The migrated keyspace takes a bench.
	r = itest.RunCLI(t, args([]string{"bench", "--duration", "500ms", "--partitions", "1", "--workspaces", "10"}, storeFlags(ks))...)
	require.Equal(t, 0, r.Code, r.Stderr)

	// Without --create-keyspace a missing keyspace is a one-line failure.
	r = itest.RunCLI(t, args([]string{"migrate", "--create-keyspace=false", "--keyspace", itest.UniqueName("cqlseq_none_")}, hostsFlag())...)
	assert.Equal(t, 1, r.Code)
	assert.Equal(t, 1, strings.Count(r.Stderr, "\n"), r.Stderr)
	assert.Contains(t, r.Stderr, "keyspace does not exist")

	// A keyspace without the schema: bench says so in one line.
	r = itest.RunCLI(t, args([]string{"bench", "--duration", "1s"}, storeFlags(itest.UniqueName("cqlseq_none_")))...)
	assert.Equal(t, 1, r.Code)
	assert.Equal(t, 1, strings.Count(r.Stderr, "\n"), r.Stderr)
	assert.Contains(t, r.Stderr, "cqlseq migrate")
}

// benchReport is the part of bench's JSON report the tests read.
type benchReport struct {
	Mode          string `json:"mode"`
	Actualization struct {
		EventsReplayed int `json:"events_replayed"`
	} `json:"actualization"`
	Sequencer phase   `json:"sequencer"`
	Baseline  *phase  `json:"baseline"`
	Ratio     float64 `json:"sequencer_to_baseline"`
	Flush     struct {
		Flushes uint64 `json:"flushes"`
	} `json:"flush"`
}

type phase struct {
	Commands  uint64  `json:"commands"`
	PerSecond float64 `json:"per_second"`
	Errors    uint64  `json:"errors"`
	Stopped   string  `json:"stopped"`
	Latency   struct {
		P50, P95, P99, Max float64
	} `json:"latency_ms"`
}

func TestBenchInspectVerify(t *testing.T) {
	itest.NoLeaks(t)
	ks := itest.Keyspace()
	const app = "7"
	dir := t.TempDir()
	var commands uint64
	for _, mode := range []string{"trust0", "trust2"} {
		jf := filepath.Join(dir, mode+".json")
		r := itest.RunCLI(t, args([]string{"bench", "--app", app, "--mode", mode, "--duration", "2s", "--partitions", "2",
			"--workspaces", "200", "--flush-after-events", "16", "--baseline", "--json", jf}, storeFlags(ks))...)
		require.Equal(t, 0, r.Code, r.Stderr)
		assert.Empty(t, r.Stderr)
		b, err := os.ReadFile(jf)
		require.NoError(t, err)
		var rep benchReport
		require.NoError(t, json.Unmarshal(b, &rep))
		assert.Equal(t, mode, rep.Mode)
		assert.Greater(t, rep.Sequencer.Commands, uint64(0), mode)
		assert.Zero(t, rep.Sequencer.Errors, mode)
		assert.Empty(t, rep.Sequencer.Stopped, mode)
		assert.Greater(t, rep.Flush.Flushes, uint64(0), mode)
		l := rep.Sequencer.Latency
		assert.True(t, 0 < l.P50 && l.P50 <= l.P95 && l.P95 <= l.P99 && l.P99 <= l.Max, "%s latency %+v", mode, l)
		require.NotNil(t, rep.Baseline, mode)
		assert.Greater(t, rep.Baseline.Commands, uint64(0), mode)
		assert.Zero(t, rep.Baseline.Errors, mode)
		assert.InDelta(t, rep.Sequencer.PerSecond/rep.Baseline.PerSecond, rep.Ratio, 1e-9, mode)
		commands += rep.Sequencer.Commands
	}

	// Both runs' events, one log per partition, verify.
	r := itest.RunCLI(t, args([]string{"verify", "--app", app, "--partition", "0,1", "--json", filepath.Join(dir, "verify.json")}, storeFlags(ks))...)
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Equal(t, 2, strings.Count(r.Stdout, ": OK\n"), r.Stdout)
	var v struct {
		OK         bool `json:"ok"`
		Partitions []struct {
			Events uint64 `json:"events"`
		} `json:"partitions"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "verify.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &v))
	assert.True(t, v.OK)
	require.Len(t, v.Partitions, 2)
	assert.GreaterOrEqual(t, v.Partitions[0].Events+v.Partitions[1].Events, commands, "every command's event is in the log")

	// Inspect: the first events are decoded.
	r = itest.RunCLI(t, args([]string{"inspect", "--app", app, "--partition", "0", "--limit", "2"}, storeFlags(ks))...)
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Contains(t, r.Stdout, "next PLog offset  ")
	assert.Contains(t, r.Stdout, "epoch ")
	assert.Contains(t, r.Stdout, "offset 1: WSID ")
	assert.Contains(t, r.Stdout, "offset 2: WSID ")
	assert.Contains(t, r.Stdout, "numbers [1:1 2:1] records [1]", "the first event of a workspace takes the first numbers")

	// With --ws, workspace 1's numbers (it lives in partition 0) and only its events.
	r = itest.RunCLI(t, args([]string{"inspect", "--app", app, "--partition", "0", "--ws", "1", "--limit", "5"}, storeFlags(ks))...)
	require.Equal(t, 0, r.Code, r.Stderr)
	assert.Regexp(t, `(?m)^workspace 1 +SeqID 1`, r.Stdout)
	assert.Contains(t, r.Stdout, "events of workspace 1 from offset 1:")
	for _, m := range regexp.MustCompile(`(?m)^  offset \d+: WSID (\d+) `).FindAllStringSubmatch(r.Stdout, -1) {
		assert.Equal(t, "1", m[1], "--ws 1 shows workspace 1's events only:\n%s", r.Stdout)
	}
}

func TestVerifyCatchesPlantedDuplicate(t *testing.T) {
	itest.NoLeaks(t)
	ks := itest.Keyspace()
	func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		hosts := itest.Hosts()
		st, err := cql.Open(ctx, cql.Options{Hosts: hosts, Keyspace: ks, DisableInitialHostLookup: len(hosts) == 1})
		require.NoError(t, err)
		defer func() { require.NoError(t, st.Close()) }()
		w, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: 3, Mode: plog.ModeTrust2})
		require.NoError(t, err)
		for off := range isequencer.PLogOffset(3) {
			e := plog.Event{Offset: off + 1, WSID: 77, WSKind: 1, Numbers: []plog.SeqNumber{{SeqID: 1, Number: 5 + isequencer.Number(off/2)}}}
			require.NoError(t, w.Write(ctx, &e)) // numbers 5, 5, 6
		}
		owner, err := vvmadapter.New(st, 9).TakeOver(ctx, 3)
		require.NoError(t, err)
		require.NoError(t, owner.PutNumbers(ctx, []isequencer.SeqValue{{Key: isequencer.NumberKey{WSID: 77, SeqID: 1}, Value: 6}}))
		require.NoError(t, owner.PutPLogOffset(ctx, 4))
	}()
	r := itest.RunCLI(t, args([]string{"verify", "--app", "9", "--partition", "3"}, storeFlags(ks))...)
	assert.Equal(t, 1, r.Code)
	assert.Equal(t, 1, strings.Count(r.Stderr, "\n"), r.Stderr)
	assert.Contains(t, r.Stderr, "verification failed")
	assert.Contains(t, r.Stdout, "duplicate: WSID 77 SeqID 1: number 5 at offset 2 was already issued at offset 1")
}
