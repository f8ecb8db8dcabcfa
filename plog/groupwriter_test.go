package plog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// batchSpy records, per write call (PutBatch, ApplyBatchIf), the offsets
// of partition 4's events it carries, and fails the first call that
// carries offset failAt: before the wrapped call (nothing written) or,
// with failAfter, after it (written, the outcome reported unknown).
type batchSpy struct {
	storage.Storage
	failAt    isequencer.PLogOffset
	failAfter bool
	mu        sync.Mutex
	batches   [][]isequencer.PLogOffset
	failed    bool
}

func (s *batchSpy) Unwrap() storage.Storage { return s.Storage }

// errSpy is the error of a call batchSpy fails.
var errSpy = errors.New("spy: injected")

// call records rows' events and runs write, failing it as the spy says.
func (s *batchSpy) call(rows []storage.Row, write func() error) error {
	var offs []isequencer.PLogOffset
	prefix := EventPKey(4, 0)[:4]
	for _, r := range rows {
		if bytes.HasPrefix(r.PKey, prefix) && len(r.PKey) == 12 && !bytes.Equal(r.CCols, FenceCCols()) {
			hi := binary.BigEndian.Uint64(r.PKey[4:])
			offs = append(offs, isequencer.PLogOffset(hi<<loBits|uint64(binary.BigEndian.Uint16(r.CCols))))
		}
	}
	s.mu.Lock()
	if len(offs) > 0 {
		s.batches = append(s.batches, offs)
	}
	fail := !s.failed && s.failAt != 0 && slices.Contains(offs, s.failAt)
	s.failed = s.failed || fail
	s.mu.Unlock()
	switch {
	case !fail:
		return write()
	case s.failAfter:
		if err := write(); err != nil {
			return err
		}
		return fmt.Errorf("%w: %w", errSpy, storage.ErrUnknownOutcome)
	}
	return fmt.Errorf("%w: %w", errSpy, storage.ErrUnavailable)
}

func (s *batchSpy) PutBatch(ctx context.Context, rows []storage.Row) error {
	return s.call(rows, func() error { return s.Storage.PutBatch(ctx, rows) })
}

func (s *batchSpy) ApplyBatchIf(ctx context.Context, pKey []byte, conds []storage.Condition, rows []storage.Row) (ok bool, err error) {
	err = s.call(rows, func() error {
		var err error
		ok, err = s.Storage.ApplyBatchIf(ctx, pKey, conds, rows)
		return err
	})
	return ok, err
}

// sent returns the recorded batches in the order they were sent (every
// writer sends a group's chunks one after another).
func (s *batchSpy) sent() [][]isequencer.PLogOffset {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.batches)
}

// batchSpyMA is a batchSpy over a storage.MultiApplier that passes it
// through: one ApplyBatchesIf call is one recorded batch.
type batchSpyMA struct{ *batchSpy }

func (s batchSpyMA) ApplyBatchesIf(ctx context.Context, batches []storage.CondBatch, applied []bool) error {
	var rows []storage.Row
	for _, b := range batches {
		rows = append(rows, b.Rows...)
	}
	return s.call(rows, func() error {
		return s.Storage.(storage.MultiApplier).ApplyBatchesIf(ctx, batches, applied)
	})
}

// groupWriterCase is one writer of the group tests: a mode on one path.
type groupWriterCase struct {
	mode Mode
	ma   bool // the storage.MultiApplier path
}

func (c groupWriterCase) String() string {
	if c.ma {
		return c.mode.String() + "/multiapplier"
	}
	return c.mode.String() + "/contract"
}

func groupWriterCases() []groupWriterCase {
	var out []groupWriterCase
	for _, m := range []Mode{ModeTrust0, ModeTrust1, ModeTrust2, ModeFenced} {
		for _, ma := range []bool{false, true} {
			if m == ModeTrust2 && ma {
				continue // trust 2 has no MultiApplier path: one PutBatch per chunk
			}
			out = append(out, groupWriterCase{m, ma})
		}
	}
	return out
}

// open returns the case's writer of partition 4 over a new mem store,
// wrapped by a spy, with the given caps, and the spy.
func (c groupWriterCase) open(t *testing.T, maxEvents, maxBytes int) (GroupWriter, *batchSpy) {
	t.Helper()
	m := mem.New(mem.Options{})
	t.Cleanup(func() { _ = m.Close() })
	spy := &batchSpy{Storage: m}
	var st storage.Storage = spy
	if c.ma {
		st = batchSpyMA{spy}
	}
	caps := storage.Probe(st)
	require.Equal(t, c.ma, caps.MultiApplier != nil)
	if c.mode == ModeFenced {
		w, err := NewFencedWriter(FencedWriterOptions{Storage: st, Capabilities: &caps, Partition: 4, Epoch: 1, MaxChunkEvents: maxEvents, MaxChunkBytes: maxBytes})
		require.NoError(t, err)
		return w, spy
	}
	w, err := NewWriter(WriterOptions{Storage: st, Capabilities: &caps, Partition: 4, Mode: c.mode, MaxChunkEvents: maxEvents, MaxChunkBytes: maxBytes})
	require.NoError(t, err)
	return w, spy
}

// evenGroup returns n events from offset from that all encode to the
// same size, each with two records of its own.
func evenGroup(from isequencer.PLogOffset, n int) []*Event {
	g := make([]*Event, n)
	for i := range g {
		off := from + isequencer.PLogOffset(i)
		r := RecordID(1000 + 2*i)
		g[i] = &Event{Offset: off, WSID: 5, WSKind: 1, WLogOffset: 1, Numbers: []SeqNumber{{1, 7}}, Records: []RecordID{r, r + 1}, Payload: []byte("p")}
	}
	return g
}

func eventSize(t *testing.T) int {
	g := evenGroup(4090, 12)
	enc, err := AppendEncoded(nil, g[0])
	require.NoError(t, err)
	for _, e := range g {
		b, _ := AppendEncoded(nil, e)
		require.Len(t, b, len(enc), "evenGroup's events encode to one size")
	}
	return BatchBytes(g[0], len(enc))
}

// offsets returns the offsets from..to.
func offsets(from, to isequencer.PLogOffset) []isequencer.PLogOffset {
	var out []isequencer.PLogOffset
	for o := from; o <= to; o++ {
		out = append(out, o)
	}
	return out
}

// TestGroupChunks: every writer, in every mode and on both paths, sends a
// group of offsets 4090..4101 (block 0 ends at 4095) in batches split at
// the block boundary, at the events cap and at the bytes cap, an event
// above the bytes cap alone.
func TestGroupChunks(t *testing.T) {
	s := eventSize(t)
	for _, tc := range []struct {
		name                string
		maxEvents, maxBytes int
		want                [][]isequencer.PLogOffset
	}{
		{"block boundary", 100, 100 * s, [][]isequencer.PLogOffset{offsets(4090, 4095), offsets(4096, 4101)}},
		{"events cap", 4, 100 * s, [][]isequencer.PLogOffset{offsets(4090, 4093), offsets(4094, 4095), offsets(4096, 4099), offsets(4100, 4101)}},
		{"bytes cap", 100, 3*s + s/2, [][]isequencer.PLogOffset{offsets(4090, 4092), offsets(4093, 4095), offsets(4096, 4098), offsets(4099, 4101)}},
		{"bytes cap exactly", 100, 3 * s, [][]isequencer.PLogOffset{offsets(4090, 4092), offsets(4093, 4095), offsets(4096, 4098), offsets(4099, 4101)}},
		{"events cap before bytes cap", 2, 3 * s, [][]isequencer.PLogOffset{offsets(4090, 4091), offsets(4092, 4093), offsets(4094, 4095), offsets(4096, 4097), offsets(4098, 4099), offsets(4100, 4101)}},
		{"an event above the bytes cap alone", 100, s - 1, func() (out [][]isequencer.PLogOffset) {
			for o := isequencer.PLogOffset(4090); o <= 4101; o++ {
				out = append(out, []isequencer.PLogOffset{o})
			}
			return out
		}()},
	} {
		for _, c := range groupWriterCases() {
			t.Run(tc.name+"/"+c.String(), func(t *testing.T) {
				w, spy := c.open(t, tc.maxEvents, tc.maxBytes)
				require.NoError(t, w.WriteGroup(context.Background(), evenGroup(4090, 12)))
				assert.Equal(t, tc.want, spy.sent())
			})
		}
	}
}

// TestTrust2GroupLargerThanAChunk: with the default caps, a trust-2 group
// of small events, three times DefaultMaxChunkBytes across three blocks,
// is written in several PutBatch calls, none above the caps or across a
// block, and every event is stored.
func TestTrust2GroupLargerThanAChunk(t *testing.T) {
	s := eventSize(t)
	n := 3 * DefaultMaxChunkBytes / s
	w, spy := groupWriterCase{mode: ModeTrust2}.open(t, 0, 0)
	g := evenGroup(4090, n)
	require.NoError(t, w.WriteGroup(context.Background(), g))
	batches := spy.sent()
	assert.GreaterOrEqual(t, len(batches), 3, "at least %d bytes in %d-byte chunks", n*s, DefaultMaxChunkBytes)
	var got []isequencer.PLogOffset
	for _, b := range batches {
		assert.LessOrEqual(t, len(b)*s, DefaultMaxChunkBytes)
		assert.LessOrEqual(t, len(b), DefaultMaxChunkEvents)
		assert.Equal(t, uint64(b[0])>>loBits, uint64(b[len(b)-1])>>loBits, "one block")
		got = append(got, b...)
	}
	assert.Equal(t, offsets(4090, 4090+isequencer.PLogOffset(n-1)), got, "every event, once")
	for _, e := range g {
		_, ok := getRow(t, spy.Storage, EventPKey(4, e.Offset), EventCCols(e.Offset))
		require.True(t, ok, "offset %d", e.Offset)
	}
}

// outcome is how TestGroupOutcomes reads one event's error (see
// GroupWriter).
type outcome string

const (
	oStored     outcome = "stored"
	oNotWritten outcome = "not written"
	oRefused    outcome = "refused"
	oUnknown    outcome = "unknown"
)

func outcomeOf(err error) outcome {
	switch {
	case err == nil:
		return oStored
	case errors.Is(err, ErrNotWritten):
		return oNotWritten
	case errors.Is(err, ErrConflict), errors.Is(err, ErrFenced):
		return oRefused
	}
	return oUnknown
}

// TestGroupOutcomes: the per-event outcome contract of GroupWriter for
// every writer, mode and path, with a group of offsets 4090..4101 in
// chunks of at most 4 events (4090..4093, 4094..4095, 4096..4099,
// 4100..4101): a chunk that fails before it is written, one written whose
// outcome is reported unknown, and an event already stored at 4097. Each
// event's reading matches the store: stored and not written exactly as
// said, unknown either way.
func TestGroupOutcomes(t *testing.T) {
	chunkOf := func(off isequencer.PLogOffset) int {
		switch {
		case off <= 4093:
			return 0
		case off <= 4095:
			return 1
		case off <= 4099:
			return 2
		}
		return 3
	}
	for _, c := range groupWriterCases() {
		for _, fault := range []string{"failed before", "failed after", "conflict"} {
			if fault == "conflict" && c.mode == ModeTrust2 {
				continue // trust 2 overwrites
			}
			t.Run(c.String()+"/"+fault, func(t *testing.T) {
				ctx := context.Background()
				w, spy := c.open(t, 4, 1<<20)
				planted := []byte{0xEE}
				switch fault {
				case "failed before":
					spy.failAt = 4094
				case "failed after":
					spy.failAt, spy.failAfter = 4094, true
				case "conflict":
					require.NoError(t, spy.Storage.Put(ctx, EventPKey(4, 4097), EventCCols(4097), planted))
				}
				g := evenGroup(4090, 12)
				err := w.WriteGroup(ctx, g)
				var ge *GroupError
				require.ErrorAs(t, err, &ge)
				require.Len(t, ge.Errs, len(g))
				want := make([]outcome, len(g))
				for i, e := range g {
					k := chunkOf(e.Offset)
					switch {
					case k == 0:
						want[i] = oStored
					case fault != "conflict" && k == 1:
						want[i] = oUnknown
					case fault != "conflict":
						want[i] = oNotWritten
					case k == 1:
						want[i] = oStored
					case c.mode == ModeFenced && k == 2:
						want[i] = oRefused // the chunk's batch is refused whole
					case e.Offset < 4097:
						want[i] = oStored // the refused chunk's events one by one, up to the conflict
					case e.Offset == 4097:
						want[i] = oRefused
					default:
						want[i] = oNotWritten
					}
				}
				got := make([]outcome, len(g))
				for i, err := range ge.Errs {
					got[i] = outcomeOf(err)
				}
				require.Equal(t, want, got, "%v", err)
				wantStored := 0
				for wantStored < len(want) && want[wantStored] == oStored {
					wantStored++
				}
				assert.Equal(t, wantStored, ge.Stored(), "the stored prefix")

				for i, e := range g {
					v, ok := getRow(t, spy.Storage, EventPKey(4, e.Offset), EventCCols(e.Offset))
					_, rec := getRow(t, spy.Storage, RecordPKey(5, e.Records[0]), RecordCCols(e.Records[0]))
					switch got[i] {
					case oStored:
						assert.True(t, ok && rec, "offset %d: stored with its records", e.Offset)
					case oNotWritten:
						assert.False(t, ok || rec, "offset %d: not written", e.Offset)
					case oRefused:
						if e.Offset == 4097 {
							assert.Equal(t, planted, v, "offset %d: not overwritten", e.Offset)
						} else {
							assert.False(t, ok, "offset %d: not written", e.Offset)
						}
						assert.False(t, rec, "offset %d: no records", e.Offset)
					case oUnknown:
						assert.Equal(t, fault == "failed after", ok, "offset %d: the spy's fault", e.Offset)
					}
				}
			})
		}
	}
}
