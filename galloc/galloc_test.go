package galloc_test

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/cqlseq/cqlseq/galloc"
	"github.com/cqlseq/cqlseq/galloc/galloccheck"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t testing.TB, st storage.Storage, name string, o galloc.Options) *galloc.Sequence {
	t.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := galloc.Open(context.Background(), st, name, o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// draw takes n values with Next.
func draw(t *testing.T, s *galloc.Sequence, n int) []int64 {
	t.Helper()
	var got []int64
	for range n {
		v, err := s.Next(context.Background())
		require.NoError(t, err)
		got = append(got, v)
	}
	return got
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		o    galloc.Options
		werr []error
	}{
		{"chunk size 0 after defaults", galloc.Options{ChunkSize: -1}, []error{galloc.ErrInvalidOptions}},
		{"start past smallint max", galloc.Options{Type: galloc.SmallInt, Start: 40000}, []error{galloc.ErrStartOutOfRange, galloc.ErrInvalidOptions, storage.ErrInvalidArgument}},
		{"start below integer min", galloc.Options{Type: galloc.Integer, Start: -3_000_000_000}, []error{galloc.ErrStartOutOfRange}},
		{"unknown type", galloc.Options{Type: 9, ChunkSize: 10}, []error{galloc.ErrInvalidOptions}},
		{"chunk larger than the type", galloc.Options{Type: galloc.SmallInt, ChunkSize: 70000}, []error{galloc.ErrInvalidOptions}},
		{"negative step", galloc.Options{Step: -2}, []error{galloc.ErrInvalidOptions}},
		{"prefetch above 1", galloc.Options{PrefetchAt: 1.5}, []error{galloc.ErrInvalidOptions}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			o.EnsureDefaults()
			err := o.Validate()
			require.Error(t, err)
			for _, w := range tt.werr {
				assert.ErrorIs(t, err, w)
			}
		})
	}
	o := galloc.Options{ChunkSize: -1, Step: -1, PrefetchAt: 2}
	o.EnsureDefaults()
	err := o.Validate()
	for _, w := range []string{"ChunkSize -1", "Step -1", "PrefetchAt 2"} {
		assert.ErrorContains(t, err, w, "every problem is reported at once")
	}
	zero := galloc.Options{ChunkSize: 0}
	assert.ErrorContains(t, zero.Validate(), "ChunkSize 0: must be at least 1", "chunk size 0 without defaults")
	ok := galloc.Options{}
	ok.EnsureDefaults()
	require.NoError(t, ok.Validate())
	assert.Equal(t, int64(1_000_000_000), ok.ChunkSize)
	for typ, w := range map[galloc.Type]int64{galloc.SmallInt: 1000, galloc.Integer: 1_000_000, galloc.BigInt: 1_000_000_000} {
		o := galloc.Options{Type: typ}
		o.EnsureDefaults()
		assert.Equal(t, w, o.ChunkSize, "%v", typ)
	}
}

func TestOpenRejectsBadInput(t *testing.T) {
	st := mem.New(mem.Options{})
	ctx := context.Background()
	_, err := galloc.Open(ctx, st, "", galloc.Options{})
	assert.ErrorIs(t, err, galloc.ErrInvalidName)
	_, err = galloc.Open(ctx, nil, "s", galloc.Options{})
	assert.ErrorIs(t, err, storage.ErrInvalidArgument)
	_, err = galloc.Open(ctx, st, "s", galloc.Options{Type: galloc.SmallInt, Start: 32768})
	assert.ErrorIs(t, err, galloc.ErrStartOutOfRange)
	_, ok, err := galloc.ReadRecord(ctx, st, "s")
	require.NoError(t, err)
	assert.False(t, ok, "bad input writes nothing")
}

func TestNextHandsOutStartStepInOrder(t *testing.T) {
	st := mem.New(mem.Options{})
	s := open(t, st, "orders", galloc.Options{ChunkSize: 4, Start: 100, Step: 10})
	ctx := context.Background()
	got := draw(t, s, 10)
	assert.Equal(t, []int64{100, 110, 120, 130, 140, 150, 160, 170, 180, 190}, got)
	require.NoError(t, s.Close()) // no allocation in flight from here on
	st1 := s.Stats()
	assert.Equal(t, uint64(10), st1.Issued)
	assert.LessOrEqual(t, st1.Held, uint64(2*4))
	rec, ok, err := galloc.ReadRecord(ctx, st, "orders")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, st1.Fetches, rec.Allocations)
	assert.Equal(t, rec.Allocated, st1.Issued+st1.Held, "every allocated value is issued or held")
	upTo, ok := rec.AllocatedUpTo()
	assert.True(t, ok)
	assert.Equal(t, int64(100)+int64(rec.Allocated)*10, upTo)
	assert.False(t, rec.LastAlloc.IsZero())
	assert.NotEmpty(t, rec.Process)
}

func TestStartZero(t *testing.T) {
	s := open(t, mem.New(mem.Options{}), "z", galloc.Options{ChunkSize: 3, StartZero: true})
	v, err := s.Next(context.Background())
	require.NoError(t, err)
	assert.Equal(t, int64(0), v)
}

func TestDefinitionMismatch(t *testing.T) {
	st := mem.New(mem.Options{})
	open(t, st, "s", galloc.Options{ChunkSize: 10})
	_, err := galloc.Open(context.Background(), st, "s", galloc.Options{ChunkSize: 20})
	assert.ErrorIs(t, err, galloc.ErrDefinitionMismatch)
	open(t, st, "s", galloc.Options{ChunkSize: 10}) // the same definition opens
}

func TestExhaustedSequence(t *testing.T) {
	s := open(t, mem.New(mem.Options{}), "small", galloc.Options{Type: galloc.SmallInt, Start: 32760, ChunkSize: 3})
	ctx := context.Background()
	var got []int64
	var err error
	for {
		var v int64
		if v, err = s.Next(ctx); err != nil {
			break
		}
		got = append(got, v)
	}
	assert.ErrorIs(t, err, galloc.ErrExhausted)
	assert.Equal(t, []int64{32760, 32761, 32762, 32763, 32764, 32765, 32766, 32767}, got, "the last chunk is cut at the type's maximum")
	_, err = s.Next(ctx)
	assert.ErrorIs(t, err, galloc.ErrExhausted, "exhaustion stays")
}

func TestNextNRuns(t *testing.T) {
	s := open(t, mem.New(mem.Options{}), "n", galloc.Options{ChunkSize: 10, NoPrefetch: true})
	ctx := context.Background()
	runs, err := s.NextN(ctx, 4)
	require.NoError(t, err)
	assert.Equal(t, []galloc.Run{{First: 1, Count: 4}}, runs, "fits: one contiguous run")
	runs, err = s.NextN(ctx, 9)
	require.NoError(t, err)
	assert.Equal(t, []galloc.Run{{First: 5, Count: 6}, {First: 11, Count: 3}}, runs, "the chunk's rest, then the next chunk")
	v, err := s.Next(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(14), v)
	_, err = s.NextN(ctx, 0)
	assert.ErrorIs(t, err, storage.ErrInvalidArgument)
}

// TestManyProcessesUniqueAndMonotonic: several Sequences (processes) on one
// store, many goroutines each: every value unique, each goroutine's values
// increasing, each process's chunks increasing, at most two chunks per
// process left unused, and nothing else lost.
func TestManyProcessesUniqueAndMonotonic(t *testing.T) {
	st := mem.New(mem.Options{})
	const procs, workers, per = 4, 8, 2000
	const chunk = 100
	ctx := context.Background()
	seqs := make([]*galloc.Sequence, procs)
	for p := range seqs {
		seqs[p] = open(t, st, "shared", galloc.Options{ChunkSize: chunk, BackoffBase: time.Microsecond, BackoffMax: time.Millisecond})
	}
	recs := make([]galloccheck.Recorder, procs*workers)
	var wg sync.WaitGroup
	for i := range recs {
		wg.Go(func() {
			s := seqs[i%procs]
			for range per {
				v, err := s.Next(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				recs[i].Add(v)
			}
		})
	}
	wg.Wait()
	for i := range recs {
		assert.True(t, recs[i].Monotonic(), "worker %d: values increase", i)
	}
	rep := galloccheck.Check(recs)
	require.Zero(t, rep.Duplicates, "values handed out twice: %v", rep.Listed)
	assert.Equal(t, uint64(procs*workers*per), rep.IDs)
	var held uint64
	for p, s := range seqs {
		require.NoError(t, s.Close())
		cs := s.Chunks()
		assert.True(t, galloccheck.ChunksIncrease(cs), "process %d: chunks increase", p)
		stt := s.Stats()
		assert.LessOrEqual(t, stt.Held, uint64(2*chunk), "process %d holds at most two chunks", p)
		held += stt.Held
	}
	rec, _, err := galloc.ReadRecord(ctx, st, "shared")
	require.NoError(t, err)
	assert.Equal(t, rec.Allocated, uint64(procs*workers*per)+held, "every allocated value is handed out or held")
}

// TestPendingBatchScenario reproduces the batched generator's wasted-batch
// scenario: batch size 10, a 30 ms allocation, 100 requests arriving at
// once. The seed's first version handed out values up to 991; here the
// requests that arrive while the allocation is pending wait for it, so the
// 100 values are exactly 1..100 from 10 chunks, each used to its end.
func TestPendingBatchScenario(t *testing.T) {
	for _, prefetch := range []bool{false, true} {
		t.Run(map[bool]string{false: "no prefetch", true: "prefetch"}[prefetch], func(t *testing.T) {
			fs, err := faulty.New(mem.New(mem.Options{}), faulty.Options{Rules: []faulty.Rule{
				{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Delay, Delay: 30 * time.Millisecond},
			}})
			require.NoError(t, err)
			s := open(t, fs, "seq", galloc.Options{ChunkSize: 10, NoPrefetch: !prefetch})
			ctx := context.Background()
			got := make([]int64, 100)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range got {
				wg.Go(func() {
					<-start
					v, err := s.Next(ctx)
					assert.NoError(t, err)
					got[i] = v
				})
			}
			close(start)
			wg.Wait()
			slices.Sort(got)
			want := make([]int64, 100)
			for i := range want {
				want[i] = int64(i + 1)
			}
			assert.Equal(t, want, got, "every chunk used to its end")
			stt := s.Stats()
			if prefetch {
				assert.LessOrEqual(t, stt.Fetches, uint64(12), "10 chunks used, at most 2 held")
			} else {
				assert.Equal(t, uint64(10), stt.Fetches, "one allocation per 10 values")
			}
			assert.Equal(t, stt.Fetches*10, stt.Issued+stt.Held)
		})
	}
}

func TestUnknownOutcomeDecidedByRead(t *testing.T) {
	for _, applied := range []bool{true, false} {
		t.Run(map[bool]string{true: "applied", false: "not applied"}[applied], func(t *testing.T) {
			fs, err := faulty.New(mem.New(mem.Options{}), faulty.Options{})
			require.NoError(t, err)
			require.NoError(t, fs.SetRules(faulty.Rule{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Fail,
				Err: storage.ErrUnknownOutcome, AfterCall: applied, Times: 1}))
			s := open(t, fs, "u", galloc.Options{ChunkSize: 5, NoPrefetch: true})
			ctx := context.Background()
			got := draw(t, s, 10)
			assert.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, got, "no chunk lost, none handed out twice")
			require.NoError(t, s.Close())
			stt := s.Stats()
			assert.Equal(t, uint64(1), stt.UnknownOutcomes)
			rec, _, err := galloc.ReadRecord(ctx, fs, "u")
			require.NoError(t, err)
			assert.Equal(t, rec.Allocated, stt.Issued+stt.Held, "the read decided the outcome: no chunk lost")
			assert.Equal(t, rec.Allocations, stt.Fetches)
		})
	}
}

// casLoser loses every compare-and-swap, as if other processes always
// allocated first.
type casLoser struct{ storage.Storage }

func (casLoser) CompareAndSwap(context.Context, []byte, []byte, []byte, []byte, time.Duration) (bool, error) {
	return false, nil
}

func TestContentionIsBounded(t *testing.T) {
	s := open(t, casLoser{mem.New(mem.Options{})}, "c", galloc.Options{ChunkSize: 5, MaxAttempts: 3, BackoffBase: time.Microsecond, BackoffMax: time.Microsecond})
	_, err := s.Next(context.Background())
	assert.ErrorIs(t, err, galloc.ErrContention)
	assert.GreaterOrEqual(t, s.Stats().Conflicts, uint64(3), "3 lost swaps per failed allocation")
}

func TestStorageFailureReachesWaiters(t *testing.T) {
	fs, err := faulty.New(mem.New(mem.Options{}), faulty.Options{})
	require.NoError(t, err)
	boom := errors.New("boom")
	require.NoError(t, fs.SetRules(faulty.Rule{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Fail, Err: boom}))
	s := open(t, fs, "f", galloc.Options{ChunkSize: 5, NoPrefetch: true})
	ctx := context.Background()
	_, err = s.Next(ctx)
	assert.ErrorIs(t, err, boom)
	fs.Clear()
	v, err := s.Next(ctx)
	require.NoError(t, err, "the next call allocates again")
	assert.Equal(t, int64(1), v)
}

func TestCloseReleasesWaiters(t *testing.T) {
	fs, err := faulty.New(mem.New(mem.Options{}), faulty.Options{})
	require.NoError(t, err)
	s := open(t, fs, "w", galloc.Options{ChunkSize: 5, NoPrefetch: true})
	ctx := context.Background()
	_, err = s.Next(ctx)
	require.NoError(t, err)
	require.NoError(t, fs.SetRules(faulty.Rule{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Timeout}))
	errc := make(chan error, 1)
	go func() {
		for {
			if _, err := s.Next(ctx); err != nil {
				errc <- err
				return
			}
		}
	}()
	require.Eventually(t, func() bool { return s.Stats().Waits > 0 }, 10*time.Second, time.Millisecond)
	require.NoError(t, s.Close())
	assert.ErrorIs(t, <-errc, galloc.ErrClosed)
	_, err = s.Next(ctx)
	assert.ErrorIs(t, err, galloc.ErrClosed)
}

func TestWaitHonoursContext(t *testing.T) {
	fs, err := faulty.New(mem.New(mem.Options{}), faulty.Options{Rules: []faulty.Rule{
		{Ops: []string{faulty.OpCompareAndSwap}, Action: faulty.Timeout},
	}})
	require.NoError(t, err)
	s := open(t, fs, "c", galloc.Options{ChunkSize: 5})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = s.Next(ctx)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestFullBigIntRange: the sequence of every bigint (Start MinInt64, Step
// 1) holds 2^64 values, one more than a uint64 counts; its capacity
// saturates at math.MaxUint64 instead of wrapping to 0 (issue 20 item 5).
func TestFullBigIntRange(t *testing.T) {
	o := galloc.Options{Type: galloc.BigInt, Start: math.MinInt64, Step: 1, ChunkSize: 10}
	o.EnsureDefaults()
	require.NoError(t, o.Validate())
	st := mem.New(mem.Options{})
	s := open(t, st, "all", o)
	assert.Equal(t, []int64{math.MinInt64, math.MinInt64 + 1, math.MinInt64 + 2}, draw(t, s, 3))
	rec, ok, err := galloc.ReadRecord(context.Background(), st, "all")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, uint64(math.MaxUint64), rec.Capacity())
	assert.False(t, rec.Exhausted())

	near := galloc.Record{Type: galloc.BigInt, ChunkSize: 10, Start: math.MinInt64, Step: 1, Allocated: math.MaxUint64 - 1}
	upTo, ok := near.AllocatedUpTo()
	assert.True(t, ok)
	assert.Equal(t, int64(math.MaxInt64-1), upTo)
	near.Allocated = math.MaxUint64
	assert.True(t, near.Exhausted(), "every value but MaxInt64 is handed out")
	b, err := near.MarshalBinary()
	require.NoError(t, err)
	var back galloc.Record
	require.NoError(t, back.UnmarshalBinary(b), "a fully allocated full-range record is not corrupt")

	// Any other Start or Step keeps the exact count.
	for _, c := range []struct {
		start, step int64
		w           uint64
	}{{math.MinInt64 + 1, 1, math.MaxUint64}, {math.MinInt64, 2, 1 << 63}, {0, 1, 1 << 63}, {math.MaxInt64, 1, 1}} {
		r := galloc.Record{Type: galloc.BigInt, ChunkSize: 1, Start: c.start, Step: c.step}
		assert.Equal(t, c.w, r.Capacity(), "start %d step %d", c.start, c.step)
	}
}
