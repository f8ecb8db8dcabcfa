package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlseq/cqlseq/plog/plogcheck"
	"github.com/cqlseq/cqlseq/storage/cql"
)

// restorePhase checks `cqlseq advance`, the step after a restore from a
// backup (docs/operations.md "Backup and restore"). Per -tools-stores
// store and -restore-modes mode: an owner runs and is SIGKILLed; the store
// is backed up (a bbolt file copied; a keyspace's rows copied with their
// write timestamps into a new keyspace); a second owner runs and is
// SIGKILLed; the backup is restored (the file copied back; the owners go
// on on the copied keyspace); advance runs and is SIGKILLed at a random
// instant, then runs again (it must exit 0); a third owner runs, and
// advance run against it must refuse and write nothing; the third owner
// is SIGKILLed and a last one acknowledges. No offset and no number the
// second owner acknowledged may be acknowledged again after the restore
// (plogcheck.Restored), and verify --acks judges the acknowledgements the
// restore kept and those after it.
type restorePhase struct{}

func (restorePhase) name() string { return "restore" }

func (restorePhase) run(ctx context.Context, t *tort) error {
	for _, store := range t.c.toolsStores {
		for _, mode := range t.c.restoreModes {
			if err := t.restore(ctx, store, mode); err != nil {
				return fmt.Errorf("restore %s %s: %w", store, mode, err)
			}
		}
	}
	return nil
}

// restoreStats are what the restore phase reports of one (store, mode).
type restoreStats struct {
	advanceRuns   int // advance runs, the killed and refused ones included
	advanceKilled int // of them, SIGKILLed by the campaign before they ended
	advanceFails  int // runs that had to exit 0 and did not
	refusals      int // runs against a live owner that refused
	notRefused    int // runs against a live owner that did not refuse
	repeated      uint64
}

func (s *restoreStats) problems() []string {
	var bad []string
	if s.advanceFails > 0 {
		bad = append(bad, fmt.Sprintf("%d advance runs exited non-zero", s.advanceFails))
	}
	if s.notRefused > 0 {
		bad = append(bad, fmt.Sprintf("%d advance runs against a live owner did not refuse", s.notRefused))
	}
	if s.repeated > 0 {
		bad = append(bad, fmt.Sprintf("%d offsets or numbers acknowledged again after the restore", s.repeated))
	}
	return bad
}

// restore runs the procedure on one (store, mode) and judges it.
func (t *tort) restore(ctx context.Context, store, mode string) error {
	tag := "restore_" + store + "_" + mode
	g, err := t.freshTarget(ctx, store, tag)
	if err != nil {
		return err
	}
	st, ts := &restoreStats{}, &toolsStats{}
	r := row{phase: fmt.Sprintf("restore %s (%s)", store, mode), failed: "n/a (killed)"}
	owner := func(name string) (string, error) {
		otag := tag + "-" + name
		ack := filepath.Join(t.c.dir, "acks-"+otag+".log")
		c, err := t.startToolsOwner(g, mode, ack, otag)
		if err != nil {
			return "", err
		}
		defer c.stop()
		return ack, t.killAtRandom(ctx, c, ts)
	}
	before, err := owner("before")
	if err != nil {
		return err
	}
	restoreFrom, err := t.backup(ctx, g, tag)
	if err != nil {
		return err
	}
	lost, err := owner("lost")
	if err != nil {
		return err
	}
	if g, err = t.restoreBackup(g, restoreFrom); err != nil {
		return err
	}
	numbers, offsets, err := advanceMargins(lost)
	if err != nil {
		return err
	}
	// A run SIGKILLed at a random instant, then one that must finish (on
	// bbolt a run takes 40-200 ms, the process's start included).
	from, within := 20, 800
	if g.file != "" {
		from, within = 5, 100
	}
	if _, err := t.advance(ctx, g, mode, numbers, offsets, tag+"-advance-killed", time.Duration(from+t.rng.IntN(within))*time.Millisecond, st); err != nil {
		return err
	}
	if _, err := t.advance(ctx, g, mode, numbers, offsets, tag+"-advance", 0, st); err != nil {
		return err
	}

	// A live owner: advance must refuse and write nothing.
	otag := tag + "-live"
	live := filepath.Join(t.c.dir, "acks-"+otag+".log")
	c, err := t.startToolsOwner(g, mode, live, otag)
	if err != nil {
		return err
	}
	if acked, err := t.ownerAcked(ctx, c, ts, ""); !acked {
		c.stop()
		if err == nil {
			err = fmt.Errorf("%s: the owner exited before acknowledging", otag)
		}
		return err
	}
	out, err := t.advance(ctx, g, mode, numbers, offsets, tag+"-advance-live", 0, nil)
	st.advanceRuns++
	if err != nil {
		c.stop()
		return err
	}
	if refused(out, store) {
		st.refusals++
		t.logf("restore: %s: advance refused while the owner (pid %d) runs", c.tag, c.cmd.Process.Pid)
	} else {
		st.notRefused++
		t.failed = true
		t.logf("restore: FAILED: %s: advance did not refuse while the owner runs:\n  %s", c.tag, strings.ReplaceAll(strings.TrimSpace(out), "\n", "\n  "))
	}
	err = t.killAfter(ctx, c, time.Duration(500+t.rng.IntN(1500))*time.Millisecond, ts, "")
	c.stop()
	if err != nil {
		return err
	}

	lastTag := tag + "-last"
	last := filepath.Join(t.c.dir, "acks-"+lastTag+".log")
	c, err = t.startToolsOwner(g, mode, last, lastTag)
	if err != nil {
		return err
	}
	_, werr := waitAcks(ctx, c, 0, 3*time.Minute)
	if werr == nil {
		werr = sleep(ctx, time.Second)
	}
	c.stop()
	if werr != nil {
		return fmt.Errorf("%s: the last owner: %w", lastTag, werr)
	}

	// Judge: what the restore lost is never acknowledged again; what it
	// kept and what came after is in the PLog.
	lostAcks, err := plogcheck.ReadAckLog(lost)
	if err != nil {
		return err
	}
	var after []plogcheck.Ack
	for _, l := range []string{live, last} {
		al, err := plogcheck.ReadAckLog(l)
		if err != nil {
			return err
		}
		after = append(after, al.Acks...)
	}
	f := plogcheck.Restored(lostAcks.Acks, after)
	st.repeated = f.Problems
	for i, fd := range f.Listed {
		if i == 5 {
			break
		}
		t.logf("restore: FAILED: %s: %s", tag, fd.Text)
	}
	kept := filepath.Join(t.c.dir, "acks-"+tag+".log")
	if err := concatAcks(kept, []string{before, live, last}); err != nil {
		return err
	}
	r.acked = countAcks(kept)
	r.faults = ts.randomKills + st.advanceKilled
	if store == storeCQL {
		err = t.verify(ctx, g.ks, kept, smallLoad.partitions, &r)
	} else {
		err = t.verifyBolt(ctx, g.file, kept, smallLoad.partitions, &r)
	}
	if err != nil {
		return err
	}
	r.dups += f.ByKind[plogcheck.Duplicate]
	r.regs += f.ByKind[plogcheck.Regression]
	r.note = fmt.Sprintf("%d acks lost with the restore, %d after it, 0 may repeat: %d did; advance margins +%d numbers, +%d offsets; %d advance runs (%d SIGKILLed, %d refused a live owner)",
		len(lostAcks.Acks), len(after), f.Problems, numbers, offsets, st.advanceRuns, st.advanceKilled, st.refusals)
	if p := st.problems(); len(p) > 0 {
		t.failed = true
		r.note += "; FAILED: " + strings.Join(p, "; ")
	}
	t.logf("restore %s %s: %s", store, mode, r.note)
	t.rows = append(t.rows, r)
	return nil
}

// refused reports whether advance's output says it refused to run: on
// CQL it saw the owner at work; a bbolt file is locked by its owner.
func refused(out, store string) bool {
	if store == storeBolt {
		return strings.Contains(out, "locked") || strings.Contains(out, "timeout")
	}
	return strings.Contains(out, "an owner is at work") && strings.Contains(out, "nothing written")
}

// advanceMargins returns margins above what the acks of lost took: twice
// the largest number and offset acknowledged, plus 1,000 (the commands in
// flight at the kill took a few more).
func advanceMargins(lost string) (numbers, offsets uint64, err error) {
	al, err := plogcheck.ReadAckLog(lost)
	if err != nil {
		return 0, 0, err
	}
	for _, a := range al.Acks {
		offsets = max(offsets, uint64(a.Offset))
		for _, n := range a.Numbers {
			numbers = max(numbers, uint64(n.Number))
		}
	}
	return 2*numbers + 1000, 2*offsets + 1000, nil
}

// advance runs cqlseq advance on g's partitions; killAfter > 0 SIGKILLs it
// then (it may have finished). A run with st must exit 0 unless killed (a
// failed check, counted); with st nil the caller judges the output.
func (t *tort) advance(ctx context.Context, g toolsTarget, mode string, numbers, offsets uint64, tag string, killAfter time.Duration, st *restoreStats) (string, error) {
	quiet := "2s"
	if g.file != "" {
		quiet = "0"
	}
	r, err := t.tool(ctx, g, tag, "advance", killAfter, "advance", "--app", strconv.Itoa(toolsApp), "--partition", toolsPartitions(), "--mode", mode,
		"--numbers", strconv.FormatUint(numbers, 10), "--offsets", strconv.FormatUint(offsets, 10), "--quiet", quiet)
	if err != nil {
		return r.out, err
	}
	summary := strings.ReplaceAll(strings.TrimSpace(r.out), "\n", "\n  ")
	if st == nil {
		t.logf("restore: advance on %s (%s) ended (%v) in %.1f s:\n  %s", g.name(), tag, r.exit, r.took.Seconds(), summary)
		return r.out, nil
	}
	st.advanceRuns++
	switch {
	case r.killed:
		st.advanceKilled++
		t.logf("restore: advance on %s SIGKILLed after %v (%s):\n  %s", g.name(), killAfter, r.outFile, summary)
	case r.exit != nil:
		st.advanceFails++
		t.failed = true
		t.logf("restore: FAILED: advance on %s exited %v (it must exit 0), in %.1f s:\n  %s", g.name(), r.exit, r.took.Seconds(), summary)
	default:
		t.logf("restore: advance on %s: exit 0 in %.1f s:\n  %s", g.name(), r.took.Seconds(), summary)
	}
	return r.out, nil
}

// backup saves g's state: a bbolt file is copied (no owner has it open); a
// keyspace's rows are copied, with their write timestamps and TTLs, into a
// new keyspace. It returns what restoreBackup restores from.
func (t *tort) backup(ctx context.Context, g toolsTarget, tag string) (string, error) {
	if g.file != "" {
		to := g.file + ".backup"
		if err := copyFile(g.file, to); err != nil {
			return "", fmt.Errorf("backup of %s: %w", g.file, err)
		}
		t.logf("restore: backed up %s to %s", g.file, to)
		return to, nil
	}
	to, err := t.keyspace(ctx, tag+"_backup")
	if err != nil {
		return "", err
	}
	n, err := t.copyRows(ctx, g.ks, to)
	if err != nil {
		return "", fmt.Errorf("backup of keyspace %s: %w", g.ks, err)
	}
	t.logf("restore: backed up keyspace %s to %s (%d rows, their write timestamps kept)", g.ks, to, n)
	return to, nil
}

// restoreBackup brings the backup from back: the file copied over g's; a
// keyspace's owners go on on the backup's keyspace.
func (t *tort) restoreBackup(g toolsTarget, from string) (toolsTarget, error) {
	if g.file != "" {
		if err := copyFile(from, g.file); err != nil {
			return g, fmt.Errorf("restoring %s: %w", g.file, err)
		}
		t.logf("restore: restored %s from %s", g.file, from)
		return g, nil
	}
	t.logf("restore: restored keyspace %s: the owners go on on %s", g.ks, from)
	return toolsTarget{ks: from}, nil
}

// copyRows copies every row of cqlseq's table from keyspace from to
// keyspace to (made by migrate), each cell with its write timestamp and
// TTL, at LOCAL_QUORUM, and returns how many.
func (t *tort) copyRows(ctx context.Context, from, to string) (int, error) {
	hosts := strings.Split(t.c.hosts, ",")
	c, err := cql.ClusterConfig(cql.Options{Hosts: hosts, Timeout: time.Minute, DisableInitialHostLookup: len(hosts) == 1})
	if err != nil {
		return 0, err
	}
	c.Consistency = gocql.LocalQuorum
	s, err := c.CreateSession()
	if err != nil {
		return 0, err
	}
	defer s.Close()
	// from and to are ksBase (hex) + a phase name: valid identifiers.
	it := s.Query("SELECT p_key, c_col, value, w, WRITETIME(value), TTL(value) FROM " + from + ".values").WithContext(ctx).PageSize(1000).Iter()
	var (
		pk, cc, v, w []byte
		ts           int64
		ttl          *int
		n            int
	)
	for it.Scan(&pk, &cc, &v, &w, &ts, &ttl) {
		q := "INSERT INTO " + to + ".values (p_key, c_col, value, w) VALUES (?, ?, ?, ?) USING TIMESTAMP ?"
		args := []any{pk, cc, v, w, ts}
		if ttl != nil && *ttl > 0 {
			q += " AND TTL ?"
			args = append(args, *ttl)
		}
		if err := s.Query(q, args...).WithContext(ctx).Exec(); err != nil {
			_ = it.Close()
			return n, err
		}
		n++
	}
	return n, it.Close()
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}
