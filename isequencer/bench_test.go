package isequencer

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchStorage is a fast in-memory ISeqStorage for benchmarks, so that
// they measure the sequencer rather than a storage: numbers live in a dense
// array indexed by WSID (1..maxWS) and SeqID, written with atomics. The PLog
// holds events of plogWidth numbers each, flat and pointer-free (so a large
// fixture costs the garbage collector nothing); event i is at offset
// plogBase+1+i.
type benchStorage struct {
	nums       []atomic.Uint64 // [ws*4 + seqID]
	mu         sync.Mutex
	nextOffset PLogOffset
	plog       []SeqValue
	plogBase   PLogOffset
	reads      atomic.Int64
}

const plogWidth = 3

func newBenchStorage(maxWS int) *benchStorage {
	return &benchStorage{nums: make([]atomic.Uint64, 4*(maxWS+1))}
}

func (b *benchStorage) ReadNumbers(ws WSID, ids []SeqID) ([]Number, error) {
	b.reads.Add(1)
	out := make([]Number, len(ids))
	for i, id := range ids {
		out[i] = Number(b.nums[uint64(ws)*4+uint64(id&3)].Load())
	}
	return out, nil
}

func (b *benchStorage) ReadNextPLogOffset() (PLogOffset, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nextOffset, nil
}

func (b *benchStorage) WriteValuesAndNextPLogOffset(batch []SeqValue, next PLogOffset) error {
	for _, v := range batch {
		b.nums[uint64(v.Key.WSID)*4+uint64(v.Key.SeqID&3)].Store(uint64(v.Value))
	}
	b.mu.Lock()
	b.nextOffset = next
	b.mu.Unlock()
	return nil
}

func (b *benchStorage) ActualizeSequencesFromPLog(ctx context.Context, from PLogOffset, batcher func([]SeqValue, PLogOffset) error) error {
	for i := int(from - b.plogBase - 1); i < len(b.plog)/plogWidth; i++ {
		if i&1023 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		if err := batcher(b.plog[i*plogWidth:(i+1)*plogWidth], b.plogBase+PLogOffset(i+1)); err != nil {
			return err
		}
	}
	return nil
}

func benchParams(st ISeqStorage, lru int) *Params {
	return &Params{SeqTypes: testSeqTypes(), SeqStorage: st, LRUCacheSize: lru, Logger: quietLogger()}
}

func spinStart(s ISequencer, ws WSID) {
	for {
		if _, ok := s.Start(kindApp, ws); ok {
			return
		}
		runtime.Gosched()
	}
}

// BenchmarkSequencer: one op is Start + Next of 3 SeqIDs + Flush, over
// workspaces round-robin, after a warm-up pass. The last case sizes the
// cache for 100,000 workspaces (LRUCacheSize 300,000 numbers) and touches
// 1,000,000, so every op misses; reads/op counts ReadNumbers calls.
func BenchmarkSequencer(b *testing.B) {
	for _, tc := range []struct {
		name       string
		workspaces int
		lru        int
	}{
		{"workspaces=1", 1, DefaultLRUCacheSize},
		{"workspaces=10000", 10_000, 3 * 10_000},
		{"workspaces=1000000/lru=100000ws", 1_000_000, 3 * 100_000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			st := newBenchStorage(tc.workspaces)
			s, cleanup, err := New(benchParams(st, tc.lru))
			if err != nil {
				b.Fatal(err)
			}
			defer cleanup()
			op := func(ws WSID) {
				spinStart(s, ws)
				for _, id := range [...]SeqID{seqWLog, seqRecord, seqCDoc} {
					if _, err := s.Next(id); err != nil {
						b.Fatal(err)
					}
				}
				s.Flush()
			}
			for ws := 1; ws <= tc.workspaces; ws++ {
				op(WSID(ws))
			}
			reads0 := st.reads.Load()
			ws := 1
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				op(WSID(ws))
				if ws++; ws > tc.workspaces {
					ws = 1
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(st.reads.Load()-reads0)/float64(b.N), "reads/op")
		})
	}
}

// BenchmarkRecovery measures New until the first ok Start: a replay of
// 1,000,000 unflushed events over 10,000 workspaces (3 numbers each), and
// a replay of a 100-event tail after the stored offset.
func BenchmarkRecovery(b *testing.B) {
	const events, workspaces = 1_000_000, 10_000
	plog := make([]SeqValue, 0, events*plogWidth)
	for i := range events {
		ws := WSID(1 + i%workspaces)
		n := Number(i/workspaces + 1)
		plog = append(plog,
			SeqValue{Key: NumberKey{WSID: ws, SeqID: seqWLog}, Value: n},
			SeqValue{Key: NumberKey{WSID: ws, SeqID: seqRecord}, Value: 200_000 + n},
			SeqValue{Key: NumberKey{WSID: ws, SeqID: seqCDoc}, Value: 322_680_000 + n})
	}
	const tail = 100
	for _, tc := range []struct {
		name   string
		stored PLogOffset // the stored next offset; the PLog ends at events
		plog   []SeqValue
	}{
		{fmt.Sprintf("unflushed=%d/workspaces=%d", events, workspaces), 0, plog},
		// The PLog before the stored offset is never read: the fixture
		// holds only the tail.
		{fmt.Sprintf("tail=%d", tail), events - tail + 1, plog[(events-tail)*plogWidth:]},
	} {
		b.Run(tc.name, func(b *testing.B) {
			// ns/op includes building a fresh storage view and the cleanup;
			// ns/recovery is New -> first ok Start alone, timed directly
			// (Stop/StartTimer would add two stop-the-world pauses per op).
			var recovery time.Duration
			for range b.N {
				// A fresh storage view per run: flushes of an earlier run
				// must not shorten the replay.
				run := newBenchStorage(workspaces)
				run.nextOffset, run.plog = tc.stored, tc.plog
				run.plogBase = PLogOffset(events - len(tc.plog)/plogWidth)
				began := time.Now()
				s, cleanup, err := New(benchParams(run, DefaultLRUCacheSize))
				if err != nil {
					b.Fatal(err)
				}
				spinStart(s, 1)
				recovery += time.Since(began)
				s.Flush()
				cleanup()
			}
			b.ReportMetric(float64(recovery.Nanoseconds())/float64(b.N), "ns/recovery")
		})
	}
}

// BenchmarkCacheHeap reports the heap held per cached number after
// touching 1,000,000 workspaces of 3 sequences with a cache that holds
// them all.
func BenchmarkCacheHeap(b *testing.B) {
	const workspaces = 1_000_000
	var perNumber float64
	for range b.N {
		st := newBenchStorage(workspaces)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		s := newSequencer(*benchParams(st, 3*workspaces))
		s.p.EnsureDefaults()
		for ws := WSID(1); ws <= workspaces; ws++ {
			s.caller.inTx, s.caller.txWS, s.caller.txKind, s.caller.txNums = true, ws, s.kinds[kindApp], nil
			for _, id := range [...]SeqID{seqWLog, seqRecord, seqCDoc} {
				if _, err := s.Next(id); err != nil {
					b.Fatal(err)
				}
			}
			s.caller.inTx, s.caller.txTaken = false, s.caller.txTaken[:0]
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if s.caller.cache.len() != workspaces {
			b.Fatalf("cached %d workspaces, want %d", s.caller.cache.len(), workspaces)
		}
		perNumber = float64(after.HeapAlloc-before.HeapAlloc) / (3 * workspaces)
		runtime.KeepAlive(s)
		s.cancel()
	}
	b.ReportMetric(perNumber, "B/number")
}
