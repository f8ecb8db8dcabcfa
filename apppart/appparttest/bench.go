package appparttest

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/internal/latency"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// BenchWorkspaces is the number of workspaces the benchmarks' commands go
// round-robin over, per partition.
const BenchWorkspaces = 1000

// benchPart hands out partition IDs: every benchmark run writes to
// partitions of its own, from an empty PLog.
var benchPart atomic.Uint32

// SetBenchPartitionBase makes the benchmarks use partition IDs above base
// (for a storage that other tests share).
func SetBenchPartitionBase(base isequencer.PartitionID) { benchPart.Store(uint32(base)) }

func nextBenchPart() isequencer.PartitionID {
	return isequencer.PartitionID(benchPart.Add(1))
}

// RunFlowBenchmarks runs the command flow (Start, Next x2, Flush, the
// event and its record written by the committer) on st at each trust level
// with one client per partition (groups of one), after a warm-up pass
// over the workspaces, on one partition and
// on four (one goroutine each), and the raw PLog insert loop (plog.Writer
// only: no sequencer) at each trust level, so that the flow's cost over
// the bare writes can be stated. Each reports cmds/s (or events/s) and
// p50/p99 latency in µs; the flow also busy/op, the Do calls refused with
// ErrBusy per command.
func RunFlowBenchmarks(b *testing.B, st storage.Storage) {
	for _, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeTrust1, plog.ModeTrust2} {
		b.Run("Flow/"+mode.String()+"/1part", func(b *testing.B) { benchFlow(b, st, mode, 1, 1) })
		b.Run("Flow/"+mode.String()+"/4parts", func(b *testing.B) { benchFlow(b, st, mode, 4, 1) })
	}
	for _, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeTrust1, plog.ModeTrust2} {
		b.Run("RawPLog/"+mode.String(), func(b *testing.B) { benchRawPLog(b, st, mode) })
	}
}

// FencingClients is the number of concurrent clients per partition in
// RunFencingBenchmarks.
const FencingClients = 16

// RunFencingBenchmarks compares the fenced mode with trust levels 0, 1 and 2
// under the same load: FencingClients concurrent clients per partition, on
// one partition and on four. Every mode writes the events of the commands
// in flight in groups (events/group reports the mean).
func RunFencingBenchmarks(b *testing.B, st storage.Storage) {
	for _, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeTrust1, plog.ModeTrust2, plog.ModeFenced} {
		b.Run("Fencing/"+mode.String()+"/1part", func(b *testing.B) { benchFlow(b, st, mode, 1, FencingClients) })
		b.Run("Fencing/"+mode.String()+"/4parts", func(b *testing.B) { benchFlow(b, st, mode, 4, FencingClients) })
	}
}

// GroupClients is the number of concurrent clients per partition in
// RunGroupCommitBenchmarks.
const GroupClients = 16

// RunGroupCommitBenchmarks runs every mode with GroupClients clients on
// each of four partitions, and the store's ceiling for the same
// bytes: RawGrouped, 4*GroupClients plog.Writers at trust level 2 (one
// event and its record per write, no sequencer), each on its own
// partition, writing at once, so that a store with group commit commits
// them together.
func RunGroupCommitBenchmarks(b *testing.B, st storage.Storage) {
	for _, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeTrust1, plog.ModeTrust2, plog.ModeFenced} {
		b.Run("Grouped/"+mode.String()+"/4parts", func(b *testing.B) { benchFlow(b, st, mode, 4, GroupClients) })
	}
	b.Run("RawGrouped", func(b *testing.B) { benchRawGrouped(b, st, 4*GroupClients) })
	b.Run("RawLoop", func(b *testing.B) { benchRawLoop(b, st, 4, GroupClients) })
}

// benchRawLoop is the store's ceiling for the flow's bytes: one goroutine
// commits, in one PutBatch each, the rows of parts*clients commands (every
// client's command in one group, each client in the workspace runFlow's
// would be in): per command its event and record, as plog writes them, and
// its two numbers, as the sequencer's flush writes them; per partition its
// next PLog offset. It reports cmds/s over the time spent in PutBatch
// (wall-cmds/s also counts building the rows), and the latency of a
// group's PutBatch as p50/p99.
func benchRawLoop(b *testing.B, st storage.Storage, parts, clients int) {
	ctx := context.Background()
	ids := make([]isequencer.PartitionID, parts)
	for i := range ids {
		ids[i] = nextBenchPart()
	}
	group := parts * clients
	e := newRawEvent()
	var rows []storage.Row
	lat := make([]time.Duration, 0, b.N/group+1)
	commits0, _ := storeCommits(st)
	b.ResetTimer()
	began := time.Now()
	for done := 0; done < b.N; {
		rows = rows[:0]
		n := min(group, b.N-done)
		for c := range n {
			part, client := ids[c%parts], c/parts
			setRawEvent(&e, part, done/parts+client)
			// The workspace client takes in round done/group of runFlow:
			// the clients of a partition go over its workspaces from
			// starting points spread over them.
			e.WSID = WS(part, 1+(client*(BenchWorkspaces/clients)+done/group)%BenchWorkspaces)
			enc, err := plog.AppendEncoded(nil, &e)
			if err != nil {
				b.Fatal(err)
			}
			rows = append(rows, storage.Row{PKey: plog.EventPKey(part, e.Offset), CCols: plog.EventCCols(e.Offset), Value: enc})
			rows = append(rows, storage.Row{PKey: plog.RecordPKey(e.WSID, plog.RecordID(e.Records[0])), CCols: plog.RecordCCols(plog.RecordID(e.Records[0])), Value: plog.RecordValue(e.Offset)})
			for _, num := range e.Numbers {
				rows = append(rows, storage.Row{PKey: vvmadapter.WSKey(App, e.WSID), CCols: vvmadapter.SeqCCols(num.SeqID), Value: vvmadapter.EncodeU64(uint64(num.Number) + 1)})
			}
			if c >= n-parts {
				rows = append(rows, storage.Row{PKey: vvmadapter.PartKey(App, part), CCols: vvmadapter.PartCCols(0), Value: vvmadapter.EncodeU64(uint64(e.Offset) + 1)})
			}
		}
		t0 := time.Now()
		if err := st.PutBatch(ctx, rows); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		done += n
	}
	elapsed := time.Since(began)
	b.StopTimer()
	var committing time.Duration
	for _, d := range lat {
		committing += d
	}
	report(b, lat, elapsed, "groups/s")
	// The ceiling: commands per second of PutBatch, the rows built
	// beforehand (as the flow builds them while the store commits).
	b.ReportMetric(float64(b.N)/committing.Seconds(), "cmds/s")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "wall-cmds/s")
	if commits, ok := storeCommits(st); ok && commits > commits0 {
		b.ReportMetric(float64(b.N)/float64(commits-commits0), "cmds/commit")
	}
}

// benchFlow runs b.N commands over parts partitions with clients
// concurrent clients each.
func benchFlow(b *testing.B, st storage.Storage, mode plog.Mode, parts, clients int) {
	runFlowWith(b, flowRun{st: st, mode: mode, parts: parts, clients: clients, workspaces: BenchWorkspaces, warm: true})
}

// flowRun is one run of the flow benchmark.
type flowRun struct {
	st             storage.Storage
	mode           plog.Mode
	parts, clients int
	// workspaces is the number of workspaces the commands of each
	// partition go round-robin over; warm runs one command in each before
	// the timer starts.
	workspaces int
	warm       bool
	// tune, if set, changes each partition's options.
	tune func(*apppart.OpenOptions)
	// started, if set, is called as the timer starts.
	started func()
}

func runFlowWith(b *testing.B, r flowRun) {
	st, mode, parts, clients := r.st, r.mode, r.parts, r.clients
	ctx := context.Background()
	ps := make([]*apppart.Partition, parts)
	ids := make([]isequencer.PartitionID, parts)
	for i := range ps {
		part := nextBenchPart()
		ids[i] = part
		o := Options(st, part, mode)
		if r.tune != nil {
			r.tune(&o)
		}
		p, err := apppart.Open(ctx, o)
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close()
		ps[i] = p
	}
	// Warm up: one command per workspace (the first waits out the initial
	// actualization), so that the timed commands measure the steady state
	// rather than one cold storage read each. Without it, one command per
	// partition waits out the actualization. The clients of a partition
	// share its workspaces.
	var warm sync.WaitGroup
	warmErr := make(chan error, parts*clients)
	for i, p := range ps {
		warm.Add(1)
		go func() {
			defer warm.Done()
			if _, err := Do(b, p, Cmd(WS(ids[i], 1))); err != nil || !r.warm {
				warmErr <- err
				return
			}
			for c := range clients {
				warm.Add(1)
				go func() {
					defer warm.Done()
					for w := 1 + c; w < r.workspaces; w += clients {
						if _, err := Do(b, p, Cmd(WS(ids[i], w+1))); err != nil {
							warmErr <- err
							return
						}
					}
				}()
			}
		}()
	}
	warm.Wait()
	close(warmErr)
	for err := range warmErr {
		if err != nil {
			b.Fatal(err)
		}
	}
	workers := parts * clients
	lat := make([][]time.Duration, workers)
	groups0, events0 := groupStats(ps)
	commits0, _ := storeCommits(st)
	var busy atomic.Int64
	var failed atomic.Value
	if r.started != nil {
		r.started()
	}
	b.ResetTimer()
	began := time.Now()
	var wg sync.WaitGroup
	for i := range workers {
		p, part := ps[i%parts], ids[i%parts]
		n := b.N / workers
		if i < b.N%workers {
			n++
		}
		lat[i] = make([]time.Duration, 0, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmds := make([]apppart.Command, r.workspaces)
			for w := range cmds {
				cmds[w] = Cmd(WS(part, w+1))
			}
			// Clients of one partition start spread over its workspaces.
			first := clientStart(i/parts, clients, r.workspaces)
			for j := range n {
				cmd := cmds[(first+j)%r.workspaces]
				t0 := time.Now()
				for {
					_, err := p.Do(ctx, cmd)
					if err == nil {
						break
					}
					if !errors.Is(err, apppart.ErrBusy) {
						failed.Store(err)
						return
					}
					busy.Add(1)
					time.Sleep(50 * time.Microsecond)
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	endRun(b, lat, began, &failed, "cmds/s")
	b.ReportMetric(float64(busy.Load())/float64(b.N), "busy/op")
	if commits, ok := storeCommits(st); ok && commits > commits0 {
		b.ReportMetric(float64(b.N)/float64(commits-commits0), "cmds/commit")
	}
	if groups, events := groupStats(ps); groups > groups0 {
		b.ReportMetric(float64(events-events0)/float64(groups-groups0), "events/group")
	}
}

// groupStats sums the partitions' GroupStats.
func groupStats(ps []*apppart.Partition) (groups, events int) {
	for _, p := range ps {
		g, e := p.GroupStats()
		groups, events = groups+g, events+e
	}
	return groups, events
}

// storeCommits returns the transactions committed by a store with group
// commit (storage/boltdb); false for another store.
func storeCommits(st storage.Storage) (uint64, bool) {
	gc, ok := storage.AsGroupCommitter(st)
	if !ok {
		return 0, false
	}
	commits, _ := gc.GroupCommits()
	return commits, true
}

// benchRawGrouped writes b.N events with writers concurrent trust-2
// plog.Writers, each on its own partition.
func benchRawGrouped(b *testing.B, st storage.Storage, writers int) {
	ctx := context.Background()
	lat := make([][]time.Duration, writers)
	var failed atomic.Value
	var wg sync.WaitGroup
	commits0, _ := storeCommits(st)
	b.ResetTimer()
	began := time.Now()
	for i := range writers {
		part := nextBenchPart()
		w, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: part, Mode: plog.ModeTrust2})
		if err != nil {
			b.Fatal(err)
		}
		n := b.N / writers
		if i < b.N%writers {
			n++
		}
		lat[i] = make([]time.Duration, 0, n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := newRawEvent()
			for j := range n {
				setRawEvent(&e, part, j)
				t0 := time.Now()
				if err := w.Write(ctx, &e); err != nil {
					failed.Store(err)
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	endRun(b, lat, began, &failed, "events/s")
	if commits, ok := storeCommits(st); ok && commits > commits0 {
		b.ReportMetric(float64(b.N)/float64(commits-commits0), "events/commit")
	}
}

func benchRawPLog(b *testing.B, st storage.Storage, mode plog.Mode) {
	part := nextBenchPart()
	w, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: part, Mode: mode})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	e := newRawEvent()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	began := time.Now()
	for i := range b.N {
		setRawEvent(&e, part, i)
		t0 := time.Now()
		if err := w.Write(ctx, &e); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	elapsed := time.Since(began)
	b.StopTimer()
	report(b, lat, elapsed, "events/s")
}

// endRun stops b's timer after its workers, started at began, ended; it
// fails b with a worker's error, else reports their latencies.
func endRun(b *testing.B, lat [][]time.Duration, began time.Time, failed *atomic.Value, unit string) {
	elapsed := time.Since(began)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	report(b, slices.Concat(lat...), elapsed, unit)
}

// newRawEvent returns an event of a command's shape for the raw loops.
func newRawEvent() plog.Event {
	return plog.Event{WSKind: Kind, Numbers: []plog.SeqNumber{{SeqID: SeqWLogOffset}, {SeqID: SeqRecordID}}, Records: []plog.RecordID{0}, Payload: []byte("cmd")}
}

// setRawEvent makes e the i-th (from 0) event of partition part's raw loop:
// offset i+1, the workspaces in turn, numbers as the flow would take them.
func setRawEvent(e *plog.Event, part isequencer.PartitionID, i int) {
	e.Offset = isequencer.PLogOffset(i + 1)
	e.WSID = WS(part, 1+i%BenchWorkspaces)
	e.WLogOffset = uint64(i/BenchWorkspaces + 1)
	e.Numbers[0].Number = isequencer.Number(e.WLogOffset)
	e.Numbers[1].Number = FirstRecordID + isequencer.Number(i/BenchWorkspaces)
	e.Records[0] = plog.RecordID(e.Numbers[1].Number)
}

// report adds throughput and p50/p99 latency (µs) to b.
func report(b *testing.B, lat []time.Duration, elapsed time.Duration, unit string) {
	if len(lat) == 0 || elapsed <= 0 {
		return
	}
	var h latency.Histogram // the project's one percentile method
	for _, d := range lat {
		h.Record(d)
	}
	pct := func(q float64) float64 { return float64(h.Quantile(q).Nanoseconds()) / 1e3 }
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), unit)
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// clientStart is the workspace index client c of clients starts at, of
// workspaces: spread evenly over all of them at every client count (c *
// workspaces / clients), so that clients walking one workspace a command
// each never walk in lockstep on one workspace (before, (c/parts) *
// (workspaces/clients) put every client at 0 when workspaces < clients);
// with more clients than workspaces several clients share a start, the
// shares differing by one at most.
func clientStart(c, clients, workspaces int) int {
	return c * workspaces / clients
}
