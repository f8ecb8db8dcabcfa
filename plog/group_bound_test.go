package plog

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// gatedRecordBatches wraps a store with only the methods of
// storage.Storage (so the Writer takes the contract's path, not
// storage.MultiApplier's): its ApplyBatchIf on a record partition counts
// the calls in flight and blocks until release is closed.
type gatedRecordBatches struct {
	storage.Storage
	release chan struct{}
	// reached is closed when want calls are in flight at once.
	reached chan struct{}
	want    int
	hit     bool // reached is closed

	mu       sync.Mutex
	arrived  int // record batches that reached the store
	inFlight int
	maxSeen  int
}

func (g *gatedRecordBatches) ApplyBatchIf(ctx context.Context, pKey []byte, conds []storage.Condition, rows []storage.Row) (bool, error) {
	if !bytes.HasPrefix(pKey, binary.BigEndian.AppendUint16(nil, RecordsView)) {
		return g.Storage.ApplyBatchIf(ctx, pKey, conds, rows) // the events' batches
	}
	g.mu.Lock()
	g.arrived++
	g.inFlight++
	g.maxSeen = max(g.maxSeen, g.inFlight)
	if g.inFlight == g.want && !g.hit {
		g.hit = true
		close(g.reached)
	}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	<-g.release
	return g.Storage.ApplyBatchIf(ctx, pKey, conds, rows)
}

func (g *gatedRecordBatches) counts() (arrived, maxSeen int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.arrived, g.maxSeen
}

// TestWriteGroupRecordBatchesBounded: a trust-0 group on the storage
// contract whose events make more than maxRecordBatchesInFlight record
// batches (300 events, each with one record in a partition of its own)
// has at most maxRecordBatchesInFlight of them in flight: with that many
// blocked in the store no other arrives; once released, the group is
// written whole, without error.
func TestWriteGroupRecordBatchesBounded(t *testing.T) {
	const n = 300
	require.Greater(t, n, maxRecordBatchesInFlight)
	m := mem.New(mem.Options{})
	t.Cleanup(func() { _ = m.Close() })
	st := &gatedRecordBatches{Storage: m, release: make(chan struct{}), reached: make(chan struct{}), want: maxRecordBatchesInFlight}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(st.release) }) }
	t.Cleanup(release) // a failed check must not leave WriteGroup blocked

	_, isMA := storage.AsMultiApplier(st)
	require.False(t, isMA, "the wrapper must hide mem's MultiApplier: insertGroupRecords is the contract's path")
	w := newWriter(t, st, ModeTrust0)
	g := make([]*Event, n)
	for i := range g {
		off := isequencer.PLogOffset(1 + i)
		// Record partition = id >> 12: one partition per event, one batch each.
		g[i] = testEvent(off, RecordID(uint64(off)<<loBits|7))
	}
	errs := make([]error, n)
	done := make(chan struct{})
	go func() {
		defer close(done)
		copy(errs, eventErrs(w.WriteGroup(context.Background(), g), len(errs)))
	}()

	select {
	case <-st.reached:
	case <-done:
		arrived, maxSeen := st.counts()
		t.Fatalf("WriteGroup returned before %d record batches were in flight (arrived %d, at most %d at once): errs %v", maxRecordBatchesInFlight, arrived, maxSeen, errs)
	case <-time.After(30 * time.Second):
		arrived, maxSeen := st.counts()
		t.Fatalf("after 30 s, %d record batches in flight at most, want %d (arrived %d)", maxSeen, maxRecordBatchesInFlight, arrived)
	}
	// A batch past the bound would arrive now, while the others are blocked.
	time.Sleep(100 * time.Millisecond)
	arrived, maxSeen := st.counts()
	assert.Equal(t, maxRecordBatchesInFlight, arrived, "record batches that reached the store while %d were blocked in it", maxRecordBatchesInFlight)
	assert.Equal(t, maxRecordBatchesInFlight, maxSeen, "record batches in flight at once while blocked")

	release()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("WriteGroup did not return within 30 s of releasing the store")
	}
	arrived, maxSeen = st.counts()
	assert.Equal(t, n, arrived, "record batches written: one per event")
	assert.LessOrEqual(t, maxSeen, maxRecordBatchesInFlight, "record batches in flight at once")
	for i, e := range g {
		require.NoError(t, errs[i], "event %d", i)
		v, ok := getRow(t, m, EventPKey(4, e.Offset), EventCCols(e.Offset))
		require.True(t, ok, "event %d", e.Offset)
		want, _ := AppendEncoded(nil, e)
		require.Equal(t, want, v, "event %d", e.Offset)
		id := e.Records[0]
		v, ok = getRow(t, m, RecordPKey(e.WSID, id), RecordCCols(id))
		require.True(t, ok, "record %d of event %d", id, e.Offset)
		require.Equal(t, RecordValue(e.Offset), v, "record %d", id)
	}
	assert.NoError(t, w.Stopped())
}

// onePartitionAtATime wraps a store with only storage.Storage's methods and
// records, per record partition, the most conditional batches in flight at
// once (each held briefly, so that overlaps show).
type onePartitionAtATime struct {
	storage.Storage
	mu       sync.Mutex
	inFlight map[string]int
	maxSeen  int
	calls    int
}

func (o *onePartitionAtATime) ApplyBatchIf(ctx context.Context, pKey []byte, conds []storage.Condition, rows []storage.Row) (bool, error) {
	if !bytes.HasPrefix(pKey, binary.BigEndian.AppendUint16(nil, RecordsView)) {
		return o.Storage.ApplyBatchIf(ctx, pKey, conds, rows)
	}
	k := string(pKey)
	o.mu.Lock()
	o.calls++
	o.inFlight[k]++
	o.maxSeen = max(o.maxSeen, o.inFlight[k])
	o.mu.Unlock()
	time.Sleep(time.Millisecond)
	defer func() {
		o.mu.Lock()
		o.inFlight[k]--
		o.mu.Unlock()
	}()
	return o.Storage.ApplyBatchIf(ctx, pKey, conds, rows)
}

// TestWriteGroupRecordsOfOnePartitionInTurn: a trust-0 group of 40 events
// of one workspace, whose records share one record partition, inserts
// their records with one conditional batch per chunk on that partition
// (one for the whole group under the default caps, five under a cap of 8
// events a chunk), never two at once (concurrent ones contend for its
// Paxos round and time out on Cassandra), and stores every record.
func TestWriteGroupRecordsOfOnePartitionInTurn(t *testing.T) {
	const n = 40
	for _, c := range []struct{ maxEvents, batches int }{{0, 1}, {8, 5}} {
		t.Run(fmt.Sprintf("chunk=%d", c.maxEvents), func(t *testing.T) {
			m := mem.New(mem.Options{})
			t.Cleanup(func() { _ = m.Close() })
			st := &onePartitionAtATime{Storage: m, inFlight: map[string]int{}}
			w, err := NewWriter(WriterOptions{Storage: st, Partition: 4, Mode: ModeTrust0, MaxChunkEvents: c.maxEvents})
			require.NoError(t, err)
			g := make([]*Event, n)
			for i := range g {
				off := isequencer.PLogOffset(1 + i)
				g[i] = testEvent(off, RecordID(100+i)) // one workspace, one record partition
			}
			require.NoError(t, w.WriteGroup(context.Background(), g))
			assert.Equal(t, c.batches, st.calls, "one record batch per chunk")
			assert.Equal(t, 1, st.maxSeen, "record batches on one partition in flight at once")
			for _, e := range g {
				id := e.Records[0]
				v, ok := getRow(t, m, RecordPKey(e.WSID, id), RecordCCols(id))
				require.True(t, ok, "record %d", id)
				assert.Equal(t, RecordValue(e.Offset), v)
			}
		})
	}
}
