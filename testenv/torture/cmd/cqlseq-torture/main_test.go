package main

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/plog/plogcheck"
	"github.com/cqlseq/cqlseq/testenv/torture"
)

func TestPartitionRulesTouchOnlyTheStoragePortOfNode3(t *testing.T) {
	rs := partitionRules(7001, "cqlseq-torture:7001")
	require.Len(t, rs, 4)
	for _, r := range rs {
		s := strings.Join(r, " ")
		require.Contains(t, s, "--dport 7001")
		require.Contains(t, s, "127.0.0.3")
		require.Contains(t, s, "-j DROP")
		require.Contains(t, s, "--comment cqlseq-torture:7001")
	}
}

// The cleanup finds exactly this cluster's rules in iptables -S output
// (which adds "-m tcp" and masks), so that -D deletes them, and leaves
// another cluster's and anyone else's alone.
func TestTaggedRulesFindOnlyThisClustersRules(t *testing.T) {
	listing := `-P INPUT ACCEPT
-A INPUT -s 127.0.0.3/32 -d 127.0.0.1/32 -p tcp -m tcp --dport 7001 -m comment --comment cqlseq-torture:7001 -j DROP
-A INPUT -s 127.0.0.3/32 -d 127.0.0.1/32 -p tcp -m tcp --dport 7002 -m comment --comment cqlseq-torture:7002 -j DROP
-A INPUT -s 10.0.0.1/32 -j ACCEPT
-A INPUT -s 127.0.0.1/32 -d 127.0.0.3/32 -p tcp -m tcp --dport 7001 -m comment --comment "cqlseq-torture:7001" -j DROP
-A INPUT -s 127.0.0.1/32 -p tcp -m comment --comment cqlseq-torture:70011 -j DROP
`
	got := taggedRules(listing, "cqlseq-torture:7001")
	require.Equal(t, [][]string{
		strings.Fields("-s 127.0.0.3/32 -d 127.0.0.1/32 -p tcp -m tcp --dport 7001 -m comment --comment cqlseq-torture:7001 -j DROP"),
		strings.Fields("-s 127.0.0.1/32 -d 127.0.0.3/32 -p tcp -m tcp --dport 7001 -m comment --comment cqlseq-torture:7001 -j DROP"),
	}, got)
}

func TestOwnerPayloadsTellRoundsAndOwnersApart(t *testing.T) {
	seen := map[int]bool{64: true} // bench's default payload: other phases
	for i := range 20 {
		for _, b := range []bool{false, true} {
			p := ownerPayload(i, b)
			require.False(t, seen[p], "payload %d used twice", p)
			seen[p] = true
		}
		require.Equal(t, torture.OwnerA, ownerOf(i, ownerPayload(i, false)))
		require.Equal(t, torture.OwnerB, ownerOf(i, ownerPayload(i, true)))
		require.Equal(t, torture.OwnerOther, ownerOf(i, ownerPayload(i+1, false)))
		require.Equal(t, torture.OwnerOther, ownerOf(i, 64))
	}
}

func TestConfigValidateReportsEveryProblem(t *testing.T) {
	c := config{phases: []string{"kills", "nope"}, modes: []string{"trust9"}, faultModes: nil, gray: grayConfig{modes: []string{"trust2"}, node: 4, pause: time.Second, min: 2},
		ownersMode: "fenced", faultLoad: load{partitions: 4, concurrency: 0, workspaces: 4}, pause: time.Second, cut: time.Second}
	err := c.validate()
	require.Error(t, err)
	for _, want := range []string{`unknown phase "nope"`, `"trust9"`, "-fault-modes: none", "-fault-concurrency 0", "-gray-node 4", "-gray-pause 1s", "-gray-min 2"} {
		require.ErrorContains(t, err, want)
	}
	good := config{phases: splitList(knownPhases), modes: []string{"trust0", "fenced"}, faultModes: []string{"fenced", "trust2"},
		gray:       grayConfig{modes: []string{"trust2"}, node: 2, pause: 10 * time.Second, after: 5 * time.Second, min: 0.2},
		ownersMode: "fenced", faultLoad: load{partitions: 4, concurrency: 16, workspaces: 400}, pause: time.Second, cut: time.Second, wholeTimeout: time.Minute,
		skewModes: []string{"trust0", "fenced"}, contestRounds: 3, contestRound: time.Second, contestPause: time.Second, modeChangeRuns: 1, modeChangeRun: time.Second,
		lateModes: []string{"trust2", "fenced"}, lateHold: time.Second, lateExpire: time.Second, lateSettle: time.Second}
	require.NoError(t, good.validate())
	bad := good
	bad.contestRound, bad.skewModes = 0, []string{"trust7"}
	bad.toolsRounds, bad.toolsStores, bad.toolsModes = -1, []string{"cql", "nfs"}, []string{"trust8"}
	bad.lateModes, bad.lateExpire = []string{"trust2", "trust6"}, 0
	err = bad.validate()
	require.ErrorContains(t, err, "-contest-round 0s")
	require.ErrorContains(t, err, `"trust7"`)
	require.ErrorContains(t, err, `-tools-stores: unknown store "nfs"`)
	require.ErrorContains(t, err, "-tools-rounds -1")
	require.ErrorContains(t, err, `"trust8"`)
	require.ErrorContains(t, err, `"trust6"`)
	require.ErrorContains(t, err, "-late-expire 0s")
}

// -short shortens the nemesis phases, but a flag given explicitly wins.
func TestShortKeepsExplicitFlags(t *testing.T) {
	var c config
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.IntVar(&c.contestRounds, "contest-rounds", 8, "")
	fs.IntVar(&c.modeChangeRuns, "modechange-runs", 2, "")
	require.NoError(t, fs.Parse([]string{"-contest-rounds", "5"}))
	shortDefaults(fs, &c)
	require.Equal(t, 5, c.contestRounds)
	require.Equal(t, 1, c.modeChangeRuns)
	require.Equal(t, 4*time.Second, c.contestRound)
	require.Equal(t, 2, c.toolsRounds)
}

func TestBusyFailedFromBenchJSON(t *testing.T) {
	b := []byte(`{"sequencer": {"commands": 10, "errors": 4,` + "\n" + `"first_error": "x"}, "busy": {"rejections": 7, "actualizing": 1}}`)
	require.Equal(t, "7/4", busyFailed(b))
}

func TestConcatAcksDropsTornTails(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	require.NoError(t, os.WriteFile(a, []byte("# x\n0 1 1 1:1,2:1\n0 2 1 1:"), 0o644))
	require.NoError(t, os.WriteFile(b, []byte("0 3 1 1:3,2:3\n"), 0o644))
	out := filepath.Join(dir, "all")
	require.NoError(t, concatAcks(out, []string{a, b}))
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, "# x\n0 1 1 1:1,2:1\n0 3 1 1:3,2:3\n", string(got))
	require.Equal(t, 2, countAcks(out))
}

func TestBenchArgsPassThroughLast(t *testing.T) {
	tt := &tort{c: config{hosts: "127.0.0.1:9042", timeout: 5 * time.Second, benchArgs: strings.Fields("--cql-health-policy=false --timeout 1s")}}
	got := tt.benchArgs("ks", "fenced", load{partitions: 4, concurrency: 16, workspaces: 5000}, "a.log", "b.json", []string{"--payload", "101"})
	s := strings.Join(got, " ")
	require.True(t, strings.HasPrefix(s, "bench --store cql --hosts 127.0.0.1:9042 --keyspace ks --mode fenced --partitions 4 --workspaces 5000 --concurrency 16 "), s)
	require.True(t, strings.HasSuffix(s, " --ready-timeout 5m --flush-after-events "+flushWindowOf("a.log")+" --payload 101 --cql-health-policy=false --timeout 1s"), s)
}

// TestFlushWindowsCoverEveryWindow: the owners' ack logs give every flush
// window of the campaign, and one name always the same.
func TestFlushWindowsCoverEveryWindow(t *testing.T) {
	seen := map[string]bool{}
	for _, name := range []string{"acks-trust0.log", "acks-trust2.log", "acks-fenced.log", "acks-late.log", "x-1.log", "x-2.log", "x-3.log", "x-4.log"} {
		seen[flushWindowOf(name)] = true
		require.Equal(t, flushWindowOf(name), flushWindowOf("/some/dir/"+name))
	}
	require.Len(t, seen, len(flushWindows))
}

// TestBenchArgsHostsOnce: --hosts is a list flag whose repetitions add up,
// so a child given its own --hosts (the late phase's writer, node 1 only)
// must not also get the campaign's.
func TestBenchArgsHostsOnce(t *testing.T) {
	tt := &tort{c: config{hosts: "127.0.0.1:9042,127.0.0.2:9042", timeout: time.Second}}
	got := tt.benchArgs("ks", "trust2", load{partitions: 1, concurrency: 1, workspaces: 1}, "a.log", "b.json", []string{"--hosts", "127.0.0.1:9042", "--host-lookup=false"})
	s := strings.Join(got, " ")
	require.Equal(t, 1, strings.Count(s, "--hosts"), s)
	require.Contains(t, s, "--hosts 127.0.0.1:9042 --host-lookup=false")
	require.NotContains(t, s, "127.0.0.2")
}

// TestLateOwnerByPayload: the late phase tells its processes' rows apart
// by payload size.
func TestLateOwnerByPayload(t *testing.T) {
	require.Equal(t, 0, lateOwner(latePayload(0), 3))
	require.Equal(t, 2, lateOwner(latePayload(2), 3))
	require.Equal(t, -1, lateOwner(latePayload(3), 3))
	require.Equal(t, -1, lateOwner(latePayload(0)-1, 3))
	require.Equal(t, "none (4 gap markers)", lateCount{gaps: 4}.String())
	require.Equal(t, "5 (process 1: 3, process 3: 2) after 8 gap markers, 1 of no process", lateCount{byOwner: map[int]int{0: 3, 2: 2}, others: 1, gaps: 8}.String())
}

// TestPerFaultTableOnlyWhenItAddsToTheSummary is issue 28's item 8:
// make gray-check printed its one-fault rows twice.
func TestPerFaultTableOnlyWhenItAddsToTheSummary(t *testing.T) {
	one := row{phase: "gray check (trust2, 4x16)", faults: 1, rates: []faultRates{{what: "node 2", met: true}}}
	two := row{phase: "node_pause fenced", faults: 2, rates: []faultRates{{what: "node 3"}, {what: "node 3"}}}
	unmeasured := row{phase: "gray check (fenced, 4x16)", faults: 1, rates: []faultRates{{what: "node 2", err: errors.New("samples stop")}}}
	assert.False(t, faultTableAddsToSummary([]row{one, one}), "one measured fault per phase: the summary says it all")
	assert.False(t, faultTableAddsToSummary([]row{{phase: "kills"}}))
	assert.True(t, faultTableAddsToSummary([]row{one, two}))
	assert.True(t, faultTableAddsToSummary([]row{one, unmeasured}), "the table gives the reason a fault was not measured")

	var b strings.Builder
	tt := &tort{out: &b, rows: []row{one}}
	tt.printTable()
	assert.Equal(t, 1, strings.Count(b.String(), "| gray check (trust2, 4x16) |"), b.String())
}

func TestStoreRefusedOnlyAReadTheStoreRefused(t *testing.T) {
	refused := "cqlseq: plogcheck: partition 1: reading stored numbers: vvmadapter: reading numbers of WSID 3906: cql: read: storage: unavailable: Cannot achieve consistency level LOCAL_QUORUM (potentially executed: true)\n"
	assert.True(t, storeRefused(refused))
	assert.False(t, storeRefused("cqlseq: plogcheck: partition 1: WSID 3 SeqID 1: stored number 5 is below 7\n"), "a finding")
	assert.False(t, storeRefused("cqlseq: --acks: open acks.log: no such file or directory\n"), "a usage error")
}

// Without a working iptables the partition phase fails, naming it, instead
// of pausing node 3 (issue 36).
func TestPartitionPhaseNeedsIptables(t *testing.T) {
	require.NoError(t, partitionCutError(7001, "/n3/cassandra.yaml", nil))
	err := partitionCutError(7001, "/n3/cassandra.yaml", errors.New("iptables is not installed (not on PATH)"))
	require.Error(t, err)
	for _, want := range []string{"partition: cannot cut node 3 off", "iptables is not installed", "apt-get install iptables", "as root"} {
		assert.ErrorContains(t, err, want)
	}
	err = partitionCutError(0, "/n3/cassandra.yaml", nil)
	assert.ErrorContains(t, err, "no storage_port in /n3/cassandra.yaml")

	t.Setenv("PATH", t.TempDir()) // no iptables there
	err = iptablesError()
	require.ErrorContains(t, err, "iptables is not installed")
	assert.False(t, iptablesWorks())
	n, err := removeTaggedRules("cqlseq-torture:7001")
	assert.NoError(t, err, "nothing to remove without iptables")
	assert.Zero(t, n)
}

func TestToolsRoundsBeginAtTheKillPoint(t *testing.T) {
	p, r, l := roundKillPoint, roundRandom, roundLiveTool
	assert.Equal(t, []toolsRound{p, l, p, l, p, l}, toolsRounds(6, storeCQL, "fenced"))
	assert.Equal(t, []toolsRound{p, r}, toolsRounds(2, storeCQL, "trust2"))
	assert.Equal(t, []toolsRound{p, r, p}, toolsRounds(3, storeBolt, "fenced"), "no live owner on bbolt: the file is locked")
	assert.Empty(t, toolsRounds(0, storeCQL, "trust0"))
}

func TestToolsReadsTheToolsNextOffsets(t *testing.T) {
	out := `actualize: cqlseq PLog in cql 127.0.0.1:9042 keyspace ks, sequence rows in cql 127.0.0.1:9042 keyspace ks, app 1
took over partition 0 (epoch 4)
partition 0: stored next offset none stored, 1,347 events read, next PLog offset 1348
  WSID 1  SeqID 1  last 70  next 71
partition 0: replayed 1,347 events in 0.00 s (634,865 events/s), offset reached 1347
partition 1: stored next offset 12, 0 events read, next PLog offset 12
written: the numbers and next PLog offsets above are stored
`
	next := parseNextOffsets(out)
	require.Equal(t, map[int]uint64{0: 1348, 1: 12}, next)
	acks := []plogcheck.Ack{{Partition: 0, Offset: 1347}, {Partition: 0, Offset: 1348}, {Partition: 1, Offset: 11}, {Partition: 1, Offset: 40}, {Partition: 2, Offset: 99}}
	assert.Equal(t, 2, acksPast(acks, next), "partition 2 is not judged")
	assert.NotContains(t, strings.Join(toolSummary(out), "\n"), "WSID")
	assert.Contains(t, strings.Join(toolSummary(out), "\n"), "took over partition 0")
}

func TestToolsVerdict(t *testing.T) {
	assert.Equal(t, "OK", (&toolsStats{toolRuns: 3, pointKills: 1}).verdict(false))
	v := (&toolsStats{toolFails: 1, liveAcksPast: 7, lastOwner: "x"}).verdict(true)
	for _, want := range []string{"**FAILED**", "verify", "1 tool runs exited non-zero", "7 acks at or past", "the last owner acknowledged nothing"} {
		assert.Contains(t, v, want)
	}
}

// The tools table has one row per store and mode, and its verdict.
func TestToolsTable(t *testing.T) {
	var b strings.Builder
	tt := &tort{out: &b, rows: []row{
		{phase: "tools cql (trust2)", acked: 900, dups: 16, regs: 2, verifyFail: true, tools: &toolsStats{owners: 3, pointKills: 1, randomKills: 1, toolRuns: 2}},
		{phase: "tools bbolt (fenced)", acked: 500, tools: &toolsStats{owners: 3, pointKills: 1, randomKills: 1, toolRuns: 2}},
	}}
	tt.printTable()
	s := b.String()
	assert.Contains(t, s, "| cql (trust2) | 3 | 1 | 1 | 0 | 2 | 0 | 0 | 900 | 0 | 16 | 2 | **FAILED**: verify |")
	assert.Contains(t, s, "| bbolt (fenced) | 3 | 1 | 1 | 0 | 2 | 0 | 0 | 500 | 0 | 0 | 0 | OK |")
}
