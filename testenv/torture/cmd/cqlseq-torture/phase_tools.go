package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cqlseq/cqlseq/plog/plogcheck"
)

// toolsPhase is issue 36's check of cqlseq actualize --write between
// owners. For each -tools-stores store (a CQL keyspace, a bbolt file) and
// each -tools-modes mode, -tools-rounds owners (bench processes) run one
// after another on one keyspace or file, each killed: some SIGKILL
// themselves at the kill point (bench --kill-before-offset-write: after a
// flush wrote the numbers, before it writes the next PLog offset), the
// others are SIGKILLed at a random instant. After each owner `cqlseq
// actualize --write` runs on the store (it must exit 0), and on CQL now and
// then `cqlseq migrate` again. In fenced mode on CQL every other round runs
// the tool while the owner is still alive: the tool takes the partitions
// over, so the owner must be fenced off (no acknowledgement of it at or
// past the next offset the tool reported). Then a fresh owner runs until it
// acknowledges, and verify --acks judges every acknowledgement of the
// (store, mode).
type toolsPhase struct{}

func (toolsPhase) name() string { return "tools" }

func (toolsPhase) run(ctx context.Context, t *tort) error {
	if t.c.toolsRounds == 0 {
		return nil
	}
	for _, store := range t.c.toolsStores {
		for _, mode := range t.c.toolsModes {
			if err := t.tools(ctx, store, mode); err != nil {
				return fmt.Errorf("tools %s %s: %w", store, mode, err)
			}
		}
	}
	return nil
}

// toolsApp is the application of the tools phase's benches and tool runs.
const toolsApp = 1

// Stores of the tools phase.
const (
	storeCQL  = "cql"
	storeBolt = "bbolt"
)

// toolsStats are what the tools phase reports of one (store, mode).
type toolsStats struct {
	owners       int    // owner processes, the last one's included
	pointKills   int    // owners that SIGKILLed themselves at the kill point
	randomKills  int    // owners SIGKILLed by the campaign
	exits        int    // owners that exited by themselves (a stopped run)
	toolRuns     int    // actualize --write runs
	liveRuns     int    // of them, against a live owner
	toolFails    int    // of them, those that did not exit 0
	tookOver     int    // "took over partition" lines the tool runs printed
	liveAcksPast int    // acks of a live owner at or past the tool's next offset
	lastOwner    string // why the last owner acknowledged nothing ("" it did)
}

// verdict is the tools table's verdict: OK, or what failed.
func (s *toolsStats) verdict(verifyFailed bool) string {
	bad := s.problems()
	if verifyFailed {
		bad = append([]string{"verify"}, bad...)
	}
	if len(bad) == 0 {
		return "OK"
	}
	return "**FAILED**: " + strings.Join(bad, "; ")
}

// problems are the failed checks other than verify's.
func (s *toolsStats) problems() []string {
	var bad []string
	if s.toolFails > 0 {
		bad = append(bad, fmt.Sprintf("%d tool runs exited non-zero", s.toolFails))
	}
	if s.liveAcksPast > 0 {
		bad = append(bad, fmt.Sprintf("live owner not fenced off: %d acks at or past the tool's next offset", s.liveAcksPast))
	}
	if s.lastOwner != "" {
		bad = append(bad, "the last owner acknowledged nothing")
	}
	return bad
}

// toolsRound is how one owner of the tools phase ends.
type toolsRound int

const (
	roundKillPoint toolsRound = iota // it SIGKILLs itself before an offset write
	roundRandom                      // SIGKILLed 0.5-4 s after its first ack
	roundLiveTool                    // the tool runs while it is alive, then SIGKILL
)

func (k toolsRound) String() string {
	return [...]string{"kill point", "random SIGKILL", "tool while alive"}[k]
}

// toolsRounds are the n rounds of a (store, mode): the first owner of the
// fresh store always dies at the kill point of its first offset write
// (killAll: probability 1), where today's unversioned tool writes land on
// an empty offset row; then random kills (in fenced mode on CQL: the tool
// against the live owner) and kill points (probability killSome) take
// turns.
func toolsRounds(n int, store, mode string) []toolsRound {
	rs := make([]toolsRound, n)
	for i := range rs {
		switch {
		case i%2 == 0:
			rs[i] = roundKillPoint
		case store == storeCQL && mode == "fenced":
			rs[i] = roundLiveTool
		default:
			rs[i] = roundRandom
		}
	}
	return rs
}

// Kill-point probabilities: the fresh store's first owner, the later ones.
const (
	killAll  = 1.0
	killSome = 0.3
)

// killPointLimit is how long a kill-point owner may run after its first
// acknowledgement before the campaign SIGKILLs it (counted as random).
const killPointLimit = 10 * time.Second

// toolsTarget is the store of one (store, mode): a keyspace or a file.
type toolsTarget struct {
	ks, file string
}

func (g toolsTarget) name() string {
	if g.file != "" {
		return g.file
	}
	return g.ks
}

// storeArgs are the cqlseq flags that name the store.
func (g toolsTarget) storeArgs(t *tort) []string {
	if g.file != "" {
		return []string{"--store", storeBolt, "--file", g.file}
	}
	return []string{"--store", storeCQL, "--hosts", t.c.hosts, "--keyspace", g.ks, "--timeout", t.c.timeout.String()}
}

// freshTarget returns an empty store of kind store named for tag: a new
// keyspace, or a bbolt file in the campaign's directory (removed if left).
func (t *tort) freshTarget(ctx context.Context, store, tag string) (toolsTarget, error) {
	if store == storeCQL {
		ks, err := t.keyspace(ctx, tag)
		return toolsTarget{ks: ks}, err
	}
	g := toolsTarget{file: filepath.Join(t.c.dir, tag+".db")}
	if err := os.Remove(g.file); err != nil && !errors.Is(err, os.ErrNotExist) {
		return g, err
	}
	return g, nil
}

// startOwner starts a bench on g. On CQL it is the campaign's bench
// (-bench-args included); on bbolt the same load on the file (-bench-args,
// CQL flags, left out).
func (t *tort) startToolsOwner(g toolsTarget, mode, ackLog, tag string, extra ...string) (*child, error) {
	_ = os.Remove(ackLog)
	extra = append([]string{"--app", strconv.Itoa(toolsApp)}, extra...)
	if g.file == "" {
		return t.startBench(g.ks, mode, smallLoad, ackLog, tag, extra...)
	}
	jsonFile := filepath.Join(t.c.dir, tag+".json")
	_ = os.Remove(jsonFile)
	ld := smallLoad
	args := []string{"bench", "--store", storeBolt, "--file", g.file, "--mode", mode,
		"--partitions", strconv.Itoa(ld.partitions), "--workspaces", strconv.Itoa(ld.workspaces),
		"--concurrency", strconv.Itoa(ld.concurrency), "--duration", "1h",
		"--ack-log", ackLog, "--json", jsonFile, "--ready-timeout", "5m", "--flush-after-events", flushWindowOf(ackLog)}
	tl := filepath.Join(t.c.dir, tag+".timeline.json")
	removeIfExists(tl)
	args = append(args, "--timeline", tl, "--timeline-interval", timelineInterval.String())
	c, err := startChild(t.c.dir, tag, t.c.cqlseq, append(args, extra...)...)
	if err != nil {
		return nil, err
	}
	c.ackLog, c.json, c.timeline = ackLog, jsonFile, tl
	t.track(c)
	return c, nil
}

// tools runs the rounds of one (store, mode) and verifies them.
func (t *tort) tools(ctx context.Context, store, mode string) error {
	tag := "tools_" + store + "_" + mode
	g, err := t.freshTarget(ctx, store, tag)
	if err != nil {
		return err
	}
	st := &toolsStats{}
	r := row{phase: fmt.Sprintf("tools %s (%s)", store, mode), failed: "n/a (killed)", tools: st}
	var acks []string
	migrations := 0
	rounds := toolsRounds(t.c.toolsRounds, store, mode)
	for i, kind := range rounds {
		otag := fmt.Sprintf("%s-%d", tag, i+1)
		ack := filepath.Join(t.c.dir, "acks-"+otag+".log")
		acks = append(acks, ack)
		var extra []string
		if kind == roundKillPoint {
			p := killSome
			if i == 0 {
				p = killAll
			}
			// A flusher that waits collects a few hundred ms of commands
			// in one flush, and commands go on while it writes their
			// numbers: at the kill the PLog holds events past the flushed
			// numbers, of workspaces the flush wrote. It flushes after
			// every group (not once a window of events is durable), so
			// that the kill point comes within the owner's first second.
			delay := time.Duration(200+t.rng.IntN(300)) * time.Millisecond
			extra = []string{"--kill-before-offset-write", strconv.FormatFloat(p, 'g', -1, 64), "--batcher-delay", delay.String(), "--flush-after-events", "1"}
			t.logf("tools %s %s: owner %d of %d: SIGKILL at the kill point (probability %v, batcher delay %v)", store, mode, i+1, len(rounds), p, delay)
		} else {
			t.logf("tools %s %s: owner %d of %d: %s", store, mode, i+1, len(rounds), kind)
		}
		c, err := t.startToolsOwner(g, mode, ack, otag, extra...)
		if err != nil {
			return err
		}
		st.owners++
		switch kind {
		case roundKillPoint:
			err = t.awaitKillPoint(ctx, c, st)
		case roundRandom:
			err = t.killAtRandom(ctx, c, st)
		case roundLiveTool:
			err = t.toolAgainstLiveOwner(ctx, g, c, otag, st)
		}
		c.stop()
		if err != nil {
			return fmt.Errorf("owner %d: %w", i+1, err)
		}
		if _, err := t.runTool(ctx, g, otag+"-actualize", st); err != nil {
			return err
		}
		if store == storeCQL && i%2 == 1 {
			t.logf("tools %s %s: cqlseq migrate %s again (idempotent)", store, mode, g.ks)
			if err := t.migrate(ctx, g.ks); err != nil {
				return err
			}
			migrations++
		}
	}
	// The last owner: it must acknowledge again; it runs a second more,
	// over workspaces an earlier owner may have left numbers of behind.
	otag := fmt.Sprintf("%s-last", tag)
	ack := filepath.Join(t.c.dir, "acks-"+otag+".log")
	acks = append(acks, ack)
	c, err := t.startToolsOwner(g, mode, ack, otag)
	if err != nil {
		return err
	}
	st.owners++
	_, werr := waitAcks(ctx, c, 0, 3*time.Minute)
	if werr == nil {
		werr = sleep(ctx, time.Second)
	}
	c.stop()
	if werr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		st.lastOwner = werr.Error()
		t.failed = true
		t.logf("tools %s %s: FAILED: the last owner acknowledged nothing: %v", store, mode, werr)
	}

	combined := filepath.Join(t.c.dir, "acks-"+tag+".log")
	if err := concatAcks(combined, acks); err != nil {
		return err
	}
	r.acked = countAcks(combined)
	r.faults = st.pointKills + st.randomKills
	if store == storeCQL {
		err = t.verify(ctx, g.ks, combined, smallLoad.partitions, &r)
	} else {
		err = t.verifyBolt(ctx, g.file, combined, smallLoad.partitions, &r)
	}
	if err != nil {
		return err
	}
	r.note = fmt.Sprintf("%d owners on one %s (%d SIGKILLed at the kill point before an offset write, %d at random, %d exited), actualize --write after each (%d against a live owner), migrate again %d times; then one more owner",
		len(rounds), map[string]string{storeCQL: "keyspace", storeBolt: "file"}[store], st.pointKills, st.randomKills, st.exits, st.liveRuns, migrations)
	if p := st.problems(); len(p) > 0 {
		t.failed = true
		r.note += "; FAILED: " + strings.Join(p, "; ")
	}
	t.rows = append(t.rows, r)
	return nil
}

// killPointLine is what bench logs before it SIGKILLs itself.
const killPointLine = "killpoint: SIGKILL before"

// atKillPoint reports whether c's stderr says it killed itself at the
// kill point, and that line.
func atKillPoint(c *child) (string, bool) {
	b, err := os.ReadFile(c.errOut)
	if err != nil {
		return "", false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, killPointLine) {
			return l, true
		}
	}
	return "", false
}

// awaitKillPoint waits for c to SIGKILL itself at the kill point; if it
// has not killPointLimit after its first acknowledgement, the campaign
// SIGKILLs it.
func (t *tort) awaitKillPoint(ctx context.Context, c *child, st *toolsStats) error {
	began := time.Now()
	var firstAck time.Time
	for {
		select {
		case <-c.done:
			if l, ok := atKillPoint(c); ok {
				st.pointKills++
				t.mark("kill point "+c.tag, c.exitedAt, c.exitedAt)
				t.logf("tools: %s: %s (%d acks logged)", c.tag, l, countAcks(c.ackLog))
			} else {
				st.exits++
				t.logf("tools: %s: %v", c.tag, c.exited())
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if firstAck.IsZero() && countAcks(c.ackLog) > 0 {
			firstAck = time.Now()
		}
		switch {
		case !firstAck.IsZero() && time.Since(firstAck) > killPointLimit:
			c.kill()
			t.mark("kill "+c.tag, c.exitedAt, c.exitedAt)
			if _, ok := atKillPoint(c); ok { // it got there first
				st.pointKills++
				return nil
			}
			st.randomKills++
			t.logf("tools: %s: not at the kill point %v after its first ack: SIGKILLed", c.tag, killPointLimit)
			return nil
		case firstAck.IsZero() && time.Since(began) > 3*time.Minute:
			return fmt.Errorf("%s: no acknowledged command and no kill within 3m0s", c.tag)
		}
	}
}

// killAtRandom SIGKILLs c 0.5-4 s after its first acknowledgement.
func (t *tort) killAtRandom(ctx context.Context, c *child, st *toolsStats) error {
	if acked, err := t.ownerAcked(ctx, c, st, ""); !acked {
		return err
	}
	return t.killAfter(ctx, c, time.Duration(500+t.rng.IntN(3500))*time.Millisecond, st, "")
}

// ownerAcked waits for c's first acknowledgement. It reports false when
// there was none: c exited by itself (counted, logged with note; nil
// error) or the wait failed (the error).
func (t *tort) ownerAcked(ctx context.Context, c *child, st *toolsStats, note string) (bool, error) {
	_, err := waitAcks(ctx, c, 0, 3*time.Minute)
	switch {
	case err == nil:
		return true, nil
	case ctx.Err() == nil && c.exited() != nil:
		st.exits++
		t.logf("tools: %s: %v%s", c.tag, c.exited(), note)
		return false, nil
	}
	return false, fmt.Errorf("%s: %w", c.tag, err)
}

// killAfter SIGKILLs c after d unless it exits by itself first (counted,
// logged with note).
func (t *tort) killAfter(ctx context.Context, c *child, d time.Duration, st *toolsStats, note string) error {
	select {
	case <-time.After(d):
		c.kill()
		t.mark("kill "+c.tag, c.exitedAt, c.exitedAt)
		st.randomKills++
	case <-c.done:
		st.exits++
		t.logf("tools: %s: %s%v", c.tag, note, c.exited())
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// toolAgainstLiveOwner runs the tool 0.5-2 s after c's first
// acknowledgement while c runs, gives c 2 s more, and SIGKILLs it unless it
// has exited (a deposed owner's partitions stop). No acknowledgement of c
// may then be at or past the next PLog offset the tool reported for its
// partition: the tool took the partition over, c was fenced off.
func (t *tort) toolAgainstLiveOwner(ctx context.Context, g toolsTarget, c *child, tag string, st *toolsStats) error {
	if acked, err := t.ownerAcked(ctx, c, st, " (no tool run against it)"); !acked {
		return err
	}
	if err := sleep(ctx, time.Duration(500+t.rng.IntN(1500))*time.Millisecond); err != nil {
		return err
	}
	if err := c.exited(); err != nil {
		st.exits++
		t.logf("tools: %s: %v (no tool run against it)", c.tag, err)
		return nil
	}
	before := countAcks(c.ackLog)
	t.logf("tools: %s: actualize --write while the owner (pid %d) runs", c.tag, c.cmd.Process.Pid)
	next, err := t.runTool(ctx, g, tag+"-actualize-live", st)
	if err != nil {
		return err
	}
	st.liveRuns++
	during := countAcks(c.ackLog) - before
	if err := t.killAfter(ctx, c, 2*time.Second, st, "exited after the tool's takeover: "); err != nil {
		return err
	}
	al, err := plogcheck.ReadAckLog(c.ackLog)
	if err != nil {
		return err
	}
	past := acksPast(al.Acks, next)
	st.liveAcksPast += past
	switch {
	case len(next) == 0:
		t.logf("tools: %s: fencing not judged: no 'next PLog offset' in the tool's output", c.tag)
	case past > 0:
		t.logf("tools: %s: FAILED: the owner was not fenced off: %d of its acks at or past the tool's next offsets %v (%d acks logged while the tool ran, %d after)",
			c.tag, past, next, during, countAcks(c.ackLog)-before-during)
	default:
		t.logf("tools: %s: fenced off: no ack at or past the tool's next offsets %v (%d acks logged while the tool ran, %d after)",
			c.tag, next, during, countAcks(c.ackLog)-before-during)
	}
	return nil
}

// acksPast counts the acks at or past the next offset of their partition
// (partitions not in next are not judged).
func acksPast(acks []plogcheck.Ack, next map[int]uint64) int {
	n := 0
	for _, a := range acks {
		if off, ok := next[int(a.Partition)]; ok && uint64(a.Offset) >= off {
			n++
		}
	}
	return n
}

// nextOffsetLine is actualize's per-partition summary line.
var nextOffsetLine = regexp.MustCompile(`^partition (\d+): stored next offset .*next PLog offset (\d+)`)

// parseNextOffsets returns the next PLog offset actualize reported for
// each partition.
func parseNextOffsets(out string) map[int]uint64 {
	next := map[int]uint64{}
	for _, l := range strings.Split(out, "\n") {
		m := nextOffsetLine.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		p, err1 := strconv.Atoi(m[1])
		off, err2 := strconv.ParseUint(m[2], 10, 64)
		if err1 == nil && err2 == nil {
			next[p] = off
		}
	}
	return next
}

// toolSummary keeps the lines of actualize's output worth logging: not
// the per-number lines.
func toolSummary(out string) []string {
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" || strings.HasPrefix(strings.TrimSpace(l), "WSID ") {
			continue
		}
		keep = append(keep, l)
	}
	return keep
}

// runTool runs cqlseq actualize --write on partitions 0 and 1 of g, its
// output in the campaign's directory (tag.out) and its summary logged, and
// returns the next PLog offsets it reported. A run that does not exit 0 is
// a failed check (counted, logged); one that could not be started ends the
// phase.
func (t *tort) runTool(ctx context.Context, g toolsTarget, tag string, st *toolsStats) (map[int]uint64, error) {
	r, err := t.tool(ctx, g, tag, "actualize --write", 0, "actualize", "--write", "--app", strconv.Itoa(toolsApp), "--partition", toolsPartitions())
	if err != nil {
		return nil, err
	}
	st.toolRuns++
	for _, l := range strings.Split(r.out, "\n") {
		if strings.HasPrefix(l, "took over partition") {
			st.tookOver++
		}
	}
	summary := toolSummary(r.out)
	if r.exit != nil {
		st.toolFails++
		t.failed = true
		t.logf("tools: FAILED: actualize --write on %s exited %v (it must exit 0), in %.1f s (%s):\n  %s", g.name(), r.exit, r.took.Seconds(),
			r.outFile, strings.Join(summary, "\n  "))
		return parseNextOffsets(r.out), nil
	}
	t.logf("tools: actualize --write on %s: exit 0 in %.1f s (%s):\n  %s", g.name(), r.took.Seconds(), r.outFile, strings.Join(summary, "\n  "))
	return parseNextOffsets(r.out), nil
}

// toolsPartitions is the --partition list of the tools' runs: the
// partitions of smallLoad.
func toolsPartitions() string {
	parts := make([]string, smallLoad.partitions)
	for i := range parts {
		parts[i] = strconv.Itoa(i)
	}
	return strings.Join(parts, ",")
}

// toolRun is how a cqlseq tool run ended: its output (also in outFile),
// its exit (nil, or the *exec.ExitError of a non-zero exit or a kill),
// whether the campaign SIGKILLed it, and how long it ran.
type toolRun struct {
	out, outFile string
	exit         error
	killed       bool
	took         time.Duration
}

// tool runs cqlseq with args and g's store flags, for at most 5 minutes,
// its output in the campaign's directory (tag.out), marked on the phase's
// plot as mark; killAfter > 0 SIGKILLs it then (it may have finished). The
// error is for a run that could not be carried out (not started, or ctx
// ended); an exit status is toolRun.exit, for the caller to judge.
func (t *tort) tool(ctx context.Context, g toolsTarget, tag, mark string, killAfter time.Duration, args ...string) (toolRun, error) {
	r := toolRun{outFile: filepath.Join(t.c.dir, tag+".out")}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, t.c.cqlseq, append(args, g.storeArgs(t)...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	if err := cmd.Start(); err != nil {
		return r, fmt.Errorf("cqlseq %s on %s: %w", args[0], g.name(), err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	if killAfter > 0 {
		select {
		case err = <-done:
		case <-time.After(killAfter):
			_ = cmd.Process.Kill()
			err, r.killed = <-done, true
		}
	} else {
		err = <-done
	}
	r.took = time.Since(began)
	t.mark(mark, began, time.Now())
	r.out = out.String()
	_ = os.WriteFile(r.outFile, out.Bytes(), 0o644)
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return r, fmt.Errorf("cqlseq %s on %s: %w", args[0], g.name(), err)
	}
	r.exit = err
	return r, nil
}

// toolsStoresKnown are -tools-stores' accepted names.
var toolsStoresKnown = []string{storeCQL, storeBolt}

func validToolsStore(s string) bool { return slices.Contains(toolsStoresKnown, s) }
