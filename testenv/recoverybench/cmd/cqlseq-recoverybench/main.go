// Command cqlseq-recoverybench times recovery on a CQL store (issue 27):
// it writes a PLog of -events events over -workspaces workspaces into
// partition 0 of a fresh keyspace, in cqlseq's format (plog.Writer,
// trust2) and in Voedger's (golden rows with their partition, offsets and
// WSID rewritten), then, -runs times, for each -variant and format, times
// a sequencer opening (isequencer.New until the first ok Start, in a child
// process) and cqlseq actualize, and prints wall time and peak RSS of
// each, and their medians.
//
// -rf sets the keyspaces' replication factor (NetworkTopologyStrategy in
// the cluster's data centre when it has several nodes), -consistency the
// consistency of every read and write (default LOCAL_QUORUM). With
// -pause-state, node -pause-node of that launcher cluster is SIGSTOPped
// -pause-after after the start of each timed child and SIGCONTed
// -pause-for later (a gray failure during the replay); the node is resumed
// on every path, also on SIGINT, SIGTERM and SIGHUP, and each line says
// when the node was paused and when the child ended.
//
// A variant is name=BENCH,CQLSEQ: this program and cqlseq built from one
// commit, so that builds can be compared in interleaved runs. Each run
// reads the sequence rows of an application ID of its own, so every run
// replays the whole PLog.
//
//	cqlseq-recoverybench -hosts 127.0.0.1:9042 -cqlseq bin/cqlseq
//	cqlseq-recoverybench -hosts H1,H2,H3 -rf 3 -pause-state S -pause-node 2 -pause-after 0.5s -pause-for 5s
//	cqlseq-recoverybench open -hosts ... -keyspace K -format cqlseq -app 7   (the child)
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"github.com/cqlseq/cqlseq/internal/stats"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/voedger"
	"github.com/cqlseq/cqlseq/plog/voedger/voedgertest"
	"github.com/cqlseq/cqlseq/seqstorage"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/cql"
)

const (
	formatCQLSeq  = "cqlseq"
	formatVoedger = "voedger"
	wsKind        = isequencer.WSKind(1)
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "open" {
		if err := runOpen(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "cqlseq-recoverybench open:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "cqlseq-recoverybench:", err)
		os.Exit(1)
	}
}

type variant struct{ name, bench, cqlseq string }

type variants []variant

func (v *variants) String() string { return fmt.Sprint(*v) }

func (v *variants) Set(s string) error {
	name, bins, ok := strings.Cut(s, "=")
	bench, cqlseqBin, ok2 := strings.Cut(bins, ",")
	if !ok || !ok2 || name == "" {
		return fmt.Errorf("want name=BENCH,CQLSEQ, got %q", s)
	}
	*v = append(*v, variant{name, bench, cqlseqBin})
	return nil
}

func run(args []string) error {
	fs := flag.NewFlagSet("cqlseq-recoverybench", flag.ContinueOnError)
	hosts := fs.String("hosts", os.Getenv("CQLSEQ_CQL_HOSTS"), "CQL contact points (default $CQLSEQ_CQL_HOSTS)")
	events := fs.Int("events", 1_000_000, "events to write")
	workspaces := fs.Int("workspaces", 10_000, "workspaces the events are spread over")
	runs := fs.Int("runs", 3, "interleaved runs of each variant")
	warmup := fs.Int("warmup", 1, "rounds of the same runs before the timed ones, discarded and never paused (fresh nodes' JVMs run their first minutes several times slower until their hot code is compiled)")
	cqlseqBin := fs.String("cqlseq", "bin/cqlseq", "cqlseq binary (the default variant's)")
	ksCQLSeq := fs.String("keyspace-cqlseq", "", "use this keyspace's cqlseq PLog instead of writing one")
	ksVoedger := fs.String("keyspace-voedger", "", "use this keyspace's Voedger PLog instead of writing one")
	formats := fs.String("formats", formatCQLSeq+","+formatVoedger, "PLog formats to time")
	rf := fs.Int("rf", 1, "replication factor of the keyspaces written (NetworkTopologyStrategy in the cluster's data centre on several nodes, else SimpleStrategy)")
	consistency := fs.String("consistency", "LOCAL_QUORUM", "consistency of the writes, the openings' and actualize's reads")
	pauseState := fs.String("pause-state", "", "launcher cluster state file: pause -pause-node of this cluster during each timed opening and actualize")
	pauseNode := fs.Int("pause-node", 2, "with -pause-state: the node (1-based) to SIGSTOP")
	pauseAfter := fs.Duration("pause-after", 500*time.Millisecond, "with -pause-state: SIGSTOP the node this long after each timed child's start")
	pauseFor := fs.Duration("pause-for", 5*time.Second, "with -pause-state: SIGCONT it this long after the SIGSTOP")
	var vs variants
	fs.Var(&vs, "variant", "name=BENCH,CQLSEQ: binaries of one build (repeat; default: this program and -cqlseq)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *hosts == "" {
		return errors.New("-hosts: required (or CQLSEQ_CQL_HOSTS)")
	}
	if _, err := gocql.ParseConsistencyWrapper(*consistency); err != nil {
		return fmt.Errorf("-consistency: %w", err)
	}
	repl, err := replication(strings.Split(*hosts, ","), *rf)
	if err != nil {
		return err
	}
	var p *pauser
	if *pauseState != "" {
		if p, err = newPauser(*pauseState, *pauseNode, *pauseAfter, *pauseFor); err != nil {
			return fmt.Errorf("-pause-state: %w", err)
		}
		defer func() {
			if err := p.stop(); err != nil {
				fmt.Fprintln(os.Stderr, "cqlseq-recoverybench: resuming:", err)
			}
		}()
		fmt.Printf("pausing %v of %s %v after the start of each timed opening and actualize, for %v\n", p, *pauseState, *pauseAfter, *pauseFor)
	}
	fmt.Printf("keyspaces: replication %s, consistency %s\n", repl, *consistency)
	if len(vs) == 0 {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		vs = variants{{"this build", self, *cqlseqBin}}
	}
	ctx := context.Background()
	stamp := time.Now().Unix()
	keyspaces := map[string]string{}
	for _, f := range strings.Split(*formats, ",") {
		ks := map[string]string{formatCQLSeq: *ksCQLSeq, formatVoedger: *ksVoedger}[f]
		if ks == "" {
			ks = fmt.Sprintf("recbench_%s_%d", f, stamp)
			if err := write(ctx, *hosts, vs[0].cqlseq, ks, repl, *consistency, f, *events, *workspaces); err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
		}
		keyspaces[f] = ks
	}
	type key struct{ variant, format, what string }
	walls, rsss := map[key][]time.Duration{}, map[key][]int64{}
	app := uint32(stamp % 1_000_000 * 100)
	// timed runs a timed child, with the node paused when -pause-state.
	warming := false
	timed := func(bin string, args ...string) (wall time.Duration, rss int64, out, paused string, err error) {
		if p == nil || warming {
			wall, rss, out, err = child(bin, args...)
			return wall, rss, out, "", err
		}
		paused, perr := p.around(func() { wall, rss, out, err = child(bin, args...) })
		if perr != nil {
			return wall, rss, out, "", perr
		}
		return wall, rss, out, "\n        " + paused, err
	}
	if *warmup < 0 {
		return errors.New("-warmup: must be >= 0")
	}
	for round := range *warmup + *runs {
		r, label := round-*warmup, fmt.Sprintf("run %d", round-*warmup+1)
		if warming = r < 0; warming {
			label = fmt.Sprintf("warm-up %d (discarded)", round+1)
		}
		for _, v := range vs {
			for _, f := range strings.Split(*formats, ",") {
				ks := keyspaces[f]
				app++
				openArgs := []string{"open", "-hosts", *hosts, "-keyspace", ks, "-format", f, "-app", strconv.Itoa(int(app))}
				if *consistency != "LOCAL_QUORUM" { // an older build's child may not know the flag
					openArgs = append(openArgs, "-consistency", *consistency)
				}
				wall, rss, out, paused, err := timed(v.bench, openArgs...)
				if err != nil {
					return fmt.Errorf("%s %s open: %w: %s", v.name, f, err, out)
				}
				k := key{v.name, f, "open"}
				if !warming {
					walls[k], rsss[k] = append(walls[k], wall), append(rsss[k], rss)
				}
				fmt.Printf("%s  %-12s %-8s open       %8.2f s  %6d MiB  (%s)%s\n", label, v.name, f, wall.Seconds(), rss>>10, strings.TrimSpace(out), paused)
				app++
				wall, rss, out, paused, err = timed(v.cqlseq, "actualize", "--store", "cql", "--hosts", *hosts, "--keyspace", ks,
					"--app", strconv.Itoa(int(app)), "--partition", "0", "--plog-format", f, "--no-progress", "--consistency", *consistency)
				if err != nil {
					return fmt.Errorf("%s %s actualize: %w: %s", v.name, f, err, out)
				}
				k = key{v.name, f, "actualize"}
				if !warming {
					walls[k], rsss[k] = append(walls[k], wall), append(rsss[k], rss)
				}
				fmt.Printf("%s  %-12s %-8s actualize  %8.2f s  %6d MiB  (%s)%s\n", label, v.name, f, wall.Seconds(), rss>>10, summary(out), paused)
			}
		}
	}
	fmt.Printf("\nmedians of %d runs, %d events over %d workspaces:\n", *runs, *events, *workspaces)
	for _, f := range strings.Split(*formats, ",") {
		for _, what := range []string{"open", "actualize"} {
			for _, v := range vs {
				k := key{v.name, f, what}
				fmt.Printf("%-8s %-10s %-12s wall %6.2f s  peak RSS %4d MiB\n", f, what, v.name, stats.Median(walls[k]).Seconds(), stats.Median(rsss[k])>>10)
			}
		}
	}
	if p != nil {
		if err := p.stop(); err != nil {
			return fmt.Errorf("resuming %v: %w", p, err)
		}
		fmt.Printf("\n%s\n", p.summary())
	}
	fmt.Println("the run completed")
	return nil
}

// summary keeps actualize's line that names the events read.
func summary(out string) string {
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, "partition ") || strings.HasPrefix(l, "actualized:") {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// child runs bin with args and returns its wall time, peak RSS (KiB) and
// output (stdout, less the lines of numbers, and stderr).
func child(bin string, args ...string) (time.Duration, int64, string, error) {
	cmd := exec.Command(bin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &lineFilter{w: &out}, &out
	began := time.Now()
	err := cmd.Run()
	wall := time.Since(began)
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss
	}
	return wall, rss, out.String(), err
}

// lineFilter drops the "  WSID ..." lines actualize prints per number.
type lineFilter struct {
	w    io.Writer
	part []byte
}

func (f *lineFilter) Write(b []byte) (int, error) {
	f.part = append(f.part, b...)
	for {
		i := slices.Index(f.part, '\n')
		if i < 0 {
			return len(b), nil
		}
		if l := f.part[:i+1]; !strings.HasPrefix(string(l), "  WSID") {
			_, _ = f.w.Write(l)
		}
		f.part = f.part[i+1:]
	}
}

func write(ctx context.Context, hosts, cqlseqBin, ks, repl, consistency, format string, n, wss int) error {
	began := time.Now()
	if out, err := exec.Command(cqlseqBin, "migrate", "--hosts", hosts, "--keyspace", ks, "--replication", repl, "--timeout", "30s").CombinedOutput(); err != nil {
		return fmt.Errorf("migrate: %w: %s", err, out)
	}
	cons, err := gocql.ParseConsistencyWrapper(consistency)
	if err != nil {
		return err
	}
	st, err := cql.Open(ctx, cql.Options{Hosts: strings.Split(hosts, ","), Keyspace: ks, Consistency: cons, Timeout: 30 * time.Second, AttemptTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer st.Close()
	switch format {
	case formatCQLSeq:
		err = writeCQLSeq(ctx, st, n, wss)
	case formatVoedger:
		err = writeVoedger(ctx, st, n, wss)
	default:
		err = fmt.Errorf("unknown format %q", format)
	}
	if err != nil {
		return err
	}
	fmt.Printf("wrote %d %s events over %d workspaces into keyspace %s in %.1f s\n", n, format, wss, ks, time.Since(began).Seconds())
	return nil
}

// writeCQLSeq writes trust2 events with plog.Writer.WriteGroup: event i
// is in workspace 1 + i%wss, with its WLog offset (SeqID 1) and a record
// ID (SeqID 2).
func writeCQLSeq(ctx context.Context, st storage.Storage, n, wss int) error {
	w, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: 0, Mode: plog.ModeTrust2})
	if err != nil {
		return err
	}
	const group = 512
	events := make([]*plog.Event, 0, group)
	for off := 1; off <= n; off++ {
		ws := 1 + off%wss
		events = append(events, &plog.Event{Partition: 0, Offset: isequencer.PLogOffset(off), WSID: isequencer.WSID(ws), WSKind: wsKind,
			WLogOffset: uint64(off/wss + 1),
			Numbers:    []plog.SeqNumber{{SeqID: 1, Number: isequencer.Number(off/wss + 1)}, {SeqID: 2, Number: isequencer.Number(200_000 + off/wss + 1)}}})
		if len(events) == group || off == n {
			if err := retry(func() error { return w.WriteGroup(ctx, events) }); err != nil {
				return fmt.Errorf("offset %d: %w", off, err)
			}
			events = events[:0]
		}
	}
	return nil
}

// writeVoedger writes the golden valid events of partition... as
// templates, each with the PLog partition (0), offset, WSID and WLog
// offset rewritten (the fixed-position fields after the codec and QName:
// u16 partition, u64 PLog offset, u64 WSID, u64 WLog offset).
func writeVoedger(ctx context.Context, st storage.Storage, n, wss int) error {
	g, err := voedgertest.Load()
	if err != nil {
		return err
	}
	var templates [][]byte
	for _, e := range g.Events {
		_, _, v := e.Bytes()
		if ev, err := voedger.Decode(isequencer.PartitionID(e.Partition), isequencer.PLogOffset(e.Offset), v); err == nil && ev.Valid {
			templates = append(templates, v)
		}
	}
	if len(templates) == 0 {
		return errors.New("no valid golden event")
	}
	const chunk = 256
	rows := make([]storage.Row, 0, chunk)
	for off := 1; off <= n; off++ {
		v := slices.Clone(templates[off%len(templates)])
		binary.BigEndian.PutUint16(v[3:], 0)
		binary.BigEndian.PutUint64(v[5:], uint64(off))
		binary.BigEndian.PutUint64(v[13:], uint64(1+off%wss))
		binary.BigEndian.PutUint64(v[21:], uint64(off/wss+1))
		rows = append(rows, storage.Row{PKey: voedger.EventPKey(0, isequencer.PLogOffset(off)), CCols: voedger.EventCCols(isequencer.PLogOffset(off)), Value: v})
		if len(rows) == chunk || off == n || off%4096 == 4095 {
			if err := retry(func() error { return st.PutBatch(ctx, rows) }); err != nil {
				return fmt.Errorf("offset %d: %w", off, err)
			}
			rows = rows[:0]
		}
	}
	return nil
}

// retry calls f until it succeeds, 5 times at most: a trust2 group and a
// put batch may be written again (a loaded node times writes out).
func retry(f func() error) error {
	var err error
	for range 5 {
		if err = f(); err == nil {
			return nil
		}
		time.Sleep(time.Second)
	}
	return err
}

// runOpen is the child: it opens a sequencer on partition 0 of the
// keyspace's PLog with the sequence rows of -app (none stored: the whole
// PLog is replayed) and prints the time from isequencer.New to the first
// ok Start.
func runOpen(args []string) error {
	fs := flag.NewFlagSet("open", flag.ContinueOnError)
	hosts := fs.String("hosts", "", "CQL contact points")
	ks := fs.String("keyspace", "", "keyspace")
	format := fs.String("format", formatCQLSeq, "PLog format")
	app := fs.Uint("app", 1, "cluster application ID of the sequence rows")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the opening to this file")
	once := fs.Bool("once", false, "time seqstorage's ActualizeOnce (what cqlseq actualize runs) instead of a sequencer")
	consistency := fs.String("consistency", "LOCAL_QUORUM", "consistency of the reads")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cons, err := gocql.ParseConsistencyWrapper(*consistency)
	if err != nil {
		return err
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	st, err := cql.Open(ctx, cql.Options{Hosts: strings.Split(*hosts, ","), Keyspace: *ks, Consistency: cons})
	if err != nil {
		return err
	}
	defer st.Close()
	var (
		s     *seqstorage.Storage
		types map[isequencer.SeqID]isequencer.Number
	)
	switch *format {
	case formatCQLSeq:
		s, err = seqstorage.New(seqstorage.Options{Storage: st, App: isequencer.ClusterAppID(*app), Partition: 0})
		types = map[isequencer.SeqID]isequencer.Number{1: 1, 2: 200_000}
	case formatVoedger:
		s, err = seqstorage.NewVoedger(seqstorage.VoedgerOptions{PLog: st, App: isequencer.ClusterAppID(*app), Partition: 0})
		types = voedger.SeqTypes()
	default:
		err = fmt.Errorf("unknown format %q", *format)
	}
	if err != nil {
		return err
	}
	began := time.Now()
	if *once {
		a, err := s.ActualizeOnce(ctx, types, false)
		if err != nil {
			return err
		}
		fmt.Printf("ActualizeOnce %.3f s, %d events, next PLog offset %d\n", time.Since(began).Seconds(), a.Events, a.Next)
		return nil
	}
	seq, cleanup, err := isequencer.New(&isequencer.Params{
		SeqTypes:   map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number{wsKind: types},
		SeqStorage: s,
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return err
	}
	defer cleanup()
	deadline := began.Add(10 * time.Minute)
	for {
		off, ok := seq.Start(wsKind, 1)
		if ok {
			fmt.Printf("New -> first ok Start %.3f s, next PLog offset %d\n", time.Since(began).Seconds(), off)
			seq.Actualize() // end the transaction; nothing is flushed
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("no ok Start within 10 minutes")
		}
		time.Sleep(time.Millisecond)
	}
}
