package isequencer

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// New returns a Sequencer over params.SeqStorage and starts its actualization:
// Start returns (0, false) until the stored state and the PLog tail are
// read. cleanup stops the sequencer's background goroutine and waits for it;
// it returns as soon as the storage call in flight (if any) returns: within
// 50 ms if the storage is an ISeqStorageCanceler (cleanup cancels a call
// that has not returned by then), else when the storage's own timeout ends
// it. Values not yet flushed are dropped:
// the PLog has their events and the next New replays them. The sequencer
// must not be used after cleanup; cleanup may be called more than once.
//
// params is copied; New validates it and reports every problem at once.
func New(params *Params) (*Sequencer, func(), error) {
	if params == nil {
		return nil, nil, fmt.Errorf("%w: nil", ErrInvalidParams)
	}
	p := *params
	p.EnsureDefaults()
	if err := p.Validate(); err != nil {
		return nil, nil, err
	}
	s := newSequencer(p)
	s.shared.state.Store(stateActualizing)
	s.shared.actualizeReq.Store(true)
	go s.run()
	s.wake()
	return s, s.cleanup, nil
}

var (
	_ ISequencer   = (*Sequencer)(nil)
	_ IReadAhead   = (*Sequencer)(nil)
	_ IGroupCommit = (*Sequencer)(nil)
)

// kindInfo lists the sequences of one WSKind in ascending SeqID order.
type kindInfo struct {
	kind WSKind
	ids  []SeqID
	init []Number
}

func (k *kindInfo) index(id SeqID) int {
	for i, x := range k.ids {
		if x == id {
			return i
		}
	}
	return -1
}

const (
	stateActualizing uint32 = 1 << iota
	stateClosed
)

// Sequencer implements ISequencer, IReadAhead and IGroupCommit (Durable
// panics without Params.GroupCommit). New makes one.
//
// Its fields are grouped by owner. The caller (the goroutine making
// ISequencer calls) owns caller, the worker goroutine (run) owns worker, and
// both sides meet only in shared (atomics, each written by one side) and
// mu. While stateActualizing is set the worker owns caller too; the atomic
// store that clears it publishes caller back.
type Sequencer struct {
	// Set by newSequencer, read-only after.
	p     Params
	kinds map[WSKind]*kindInfo
	m     Metrics
	// ringLimit and marksLimit bound the rings' growth (slots); tentative
	// is Params.GroupCommit (Flush does not report its event durable).
	ringLimit  uint64
	marksLimit uint64
	tentative  bool
	signal     chan struct{} // wakes a parked worker

	// Lifetime: see cleanup. cancelStorage is nil if SeqStorage is not an
	// ISeqStorageCanceler; run closes done when it returns.
	ctx           context.Context
	cancel        context.CancelFunc
	cancelStorage func()
	done          chan struct{}
	once          sync.Once

	caller    callerState
	shared    sharedState
	worker    workerState
	readAhead readAheadState

	mu struct {
		sync.Mutex
		overflow      []SeqValue
		overflowTaken []SeqValue // being written by the worker
		// overflowMinNext and overflowMaxNext bound the next offsets of
		// the transactions in overflow.
		overflowMinNext, overflowMaxNext PLogOffset
		// recovered is the actualization result until it is written.
		// Nobody writes to the map after it is published here.
		recovered map[NumberKey]Number
	}
}

// callerState is used only by Start, Next, Flush and Actualize (and by the
// worker while it actualizes).
type callerState struct {
	cache      *wsCache
	nextOffset PLogOffset
	inTx       bool
	txKind     *kindInfo
	txWS       WSID
	txNums     []Number   // the cache entry of txWS, nil until the first Next
	txTaken    []SeqValue // values taken by the transaction
	lastKind   *kindInfo  // memo of the last kinds lookup
	overlayBuf []Number
	tail       uint64          // the ring position after the last value accepted
	markTail   uint64          // the caller's copy of shared.markTailPub
	values     *ring[SeqValue] // the caller's copy of shared.values
	marks      *ring[txMark]   // the caller's copy of shared.marks
}

// sharedState is where the caller and the worker meet.
//
// Values accepted by Flush travel to the worker through a single-producer
// single-consumer ring: Flush writes ring[tail...] and publishes the new
// tail in the transaction's mark (below). ringHead advances only once
// values are written, so
// ring[ringHead:tail] is exactly what a cache miss must overlay on the
// stored numbers; the miss reads only the part below the position the
// cache kept for its workspace (wsCache: ring positions), so that its cost
// does not grow with a backlog of other workspaces' values.
//
// Flush also appends a mark (the transaction's next offset, and the ring
// tail after its values) to a single-producer ring, marks, published by
// markTailPub after the values. The worker reads the watermark, then
// markTailPub, then the marks (so every transaction the watermark covers,
// an overflowed one too, has its mark and values published), and writes
// ring values and claims offsets only up to the last mark the watermark
// covers: the offset it writes never claims values it
// does not write, nor an event not durable. There is one write path: with
// GroupCommit the watermark is Durable's, without it Flush moves it past
// its own mark (the caller wrote the event before Flush).
//
// Both rings start small (initialRingSize) and grow on demand up to the
// bound MaxNumUnflushedValues sets (see ring): an idle partition holds
// kilobytes, not the bound. The caller grows them in Flush and publishes
// the new ring (values, marks) before any position written to it.
//
// The atomics written on every transaction sit alone on their cache lines
// (padded), so that neither side's writes invalidate the other's
// reads of unrelated fields.
type sharedState struct {
	markTailPub padded[atomic.Uint64]          // written by the caller
	values      atomic.Pointer[ring[SeqValue]] // written by the caller
	marks       atomic.Pointer[ring[txMark]]   // written by the caller

	// state holds stateActualizing and stateClosed.
	state atomic.Uint32
	// overflowN counts values in mu.overflow and mu.overflowTaken: values
	// of a transaction too large for the ring's free space.
	overflowN atomic.Int64
	// hasRecovered is set while mu.recovered is not empty.
	hasRecovered atomic.Bool
	actualizeReq atomic.Bool

	ringHead padded[atomic.Uint64] // written by the worker
	markHead padded[atomic.Uint64] // written by the worker
	// watermark is the next offset below which every event is durable,
	// as reported by Durable (with GroupCommit) or Flush.
	watermark padded[atomic.Uint64]
	parked    padded[atomic.Bool] // written by the worker
}

// workerState is used only by the worker goroutine (run).
type workerState struct {
	wbuf          []SeqValue
	wsBuf         []WSID // the workspaces of the write in flight (readahead.go)
	replay        replay
	lastSeen      PLogOffset
	head          uint64     // the worker's copy of shared.ringHead
	mhead         uint64     // the worker's copy of shared.markHead
	claim         PLogOffset // the next offset of the last mark written
	writtenOffset PLogOffset // next offset last written to storage
}

func newSequencer(p Params) *Sequencer {
	s := &Sequencer{
		p:      p,
		kinds:  make(map[WSKind]*kindInfo, len(p.SeqTypes)),
		m:      p.Metrics,
		signal: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	if s.m == nil {
		s.m = nopMetrics{}
	}
	if lr, ok := s.m.(LimitReporter); ok {
		lr.UnflushedLimit(p.MaxNumUnflushedValues)
	}
	width := 1
	for kind, seqs := range p.SeqTypes {
		k := &kindInfo{kind: kind}
		for id := range seqs {
			k.ids = append(k.ids, id)
		}
		slices.Sort(k.ids)
		for _, id := range k.ids {
			k.init = append(k.init, seqs[id])
		}
		s.kinds[kind] = k
		width = max(width, len(k.ids))
	}
	s.caller.cache = newWSCache(max(1, p.LRUCacheSize/width), width)
	s.caller.overlayBuf = make([]Number, width)
	s.caller.txTaken = make([]SeqValue, 0, 8)
	// Start admits a transaction while at most MaxNumUnflushedValues wait,
	// so the ring may grow to hold them and the values of a transaction of
	// up to 256 (larger ones overflow to mu.overflow).
	limit := pow2AtLeast(p.MaxNumUnflushedValues + 256)
	s.ringLimit = uint64(limit)
	s.marksLimit = uint64(limit)
	s.tentative = p.GroupCommit
	s.resetRings()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if c, ok := p.SeqStorage.(ISeqStorageCanceler); ok {
		s.cancelStorage = c.CancelCalls
	}
	return s
}

// initialRingSize is the number of slots each ring starts with.
const initialRingSize = 256

// resetRings gives the caller new rings of initialRingSize slots (bounded
// by the limits) and publishes them. Only while the caller is locked out:
// in newSequencer, or by the worker while it actualizes.
func (s *Sequencer) resetRings() {
	s.caller.values = newRing[SeqValue](int(min(initialRingSize, s.ringLimit)))
	s.shared.values.Store(s.caller.values)
	s.caller.marks = newRing[txMark](int(min(initialRingSize, s.marksLimit)))
	s.shared.marks.Store(s.caller.marks)
}

// cleanupGrace is how long cleanup lets a storage call in flight finish on
// its own before it cancels it: a healthy store answers within it (and a
// flush then lands), a hung one is cut off after it.
const cleanupGrace = 50 * time.Millisecond

// cleanup stops the worker and the read-aheads. Nothing new starts once
// the state is closed and ctx is cancelled (no new storage call, no retry,
// no read-ahead). The storage calls in flight (the worker's and
// ReadAhead's) get cleanupGrace to finish; then, if the storage is an
// ISeqStorageCanceler, cleanup cancels them, and it waits for the worker
// and every ReadAhead call.
func (s *Sequencer) cleanup() {
	s.once.Do(func() {
		s.shared.state.Or(stateClosed)
		reads := s.readAhead.close()
		s.cancel()
		if s.cancelStorage != nil {
			grace := time.NewTimer(cleanupGrace)
			defer grace.Stop()
			for done, read := s.done, reads; done != nil || read != nil; {
				select {
				case <-done:
					done = nil
				case <-read:
					read = nil
				case <-grace.C:
					s.cancelStorage()
					done, read = nil, nil
				}
			}
		}
		<-s.done
		<-reads
	})
}

// CancelStorageCalls cancels the storage calls in flight and fails later
// ones if SeqStorage is an ISeqStorageCanceler (decided once, by New), and
// does nothing otherwise. cleanup calls it after its grace; an owner may
// call it earlier, at any time and from any goroutine, to unblock a caller
// waiting in Next for a numbers read (that Next fails). The sequencer must
// not be used after it, but for cleanup.
func (s *Sequencer) CancelStorageCalls() {
	if s.cancelStorage != nil {
		s.cancelStorage()
	}
}

func (s *Sequencer) wake() {
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// DurableNext returns the next PLog offset below which every event is
// durable: as Durable (with GroupCommit) or Flush reported it, or as the
// last actualization read the PLog. It never decreases. Any goroutine may
// call it.
func (s *Sequencer) DurableNext() PLogOffset {
	return PLogOffset(s.shared.watermark.v.Load())
}

// Ready reports whether Start would begin a transaction now: the
// sequencer is not actualizing or closed, and its unflushed values and
// marks are under their limits. Like Start, it is called by the caller's
// goroutine, outside a transaction; it counts no busy answer.
func (s *Sequencer) Ready() bool {
	return s.shared.state.Load() == 0 && !s.overLimits()
}

// overLimits reports whether the unflushed values or marks are at their
// limits (Start answers busy).
func (s *Sequencer) overLimits() bool {
	return s.unflushedValues() > int64(s.p.MaxNumUnflushedValues) ||
		s.caller.markTail-s.shared.markHead.v.Load() >= s.marksLimit
}

// Start implements ISequencer.
func (s *Sequencer) Start(wsKind WSKind, wsID WSID) (PLogOffset, bool) {
	c := &s.caller
	if c.inTx {
		panic("isequencer: Start: a Sequencing Transaction is already in progress")
	}
	if wsID == 0 {
		panic("isequencer: Start: WSID 0")
	}
	if st := s.shared.state.Load(); st != 0 {
		if st&stateClosed == 0 {
			s.m.Busy(BusyActualizing)
		}
		return 0, false
	}
	if s.overLimits() {
		s.m.Busy(BusyUnflushed)
		return 0, false
	}
	k := c.lastKind
	if k == nil || k.kind != wsKind {
		k = s.kinds[wsKind]
		if k != nil {
			c.lastKind = k
		}
	}
	c.inTx = true
	c.txKind = k
	c.txWS = wsID
	c.txNums = nil
	c.txTaken = c.txTaken[:0]
	s.m.Transaction()
	return c.nextOffset, true
}

// Next implements ISequencer.
func (s *Sequencer) Next(seqID SeqID) (Number, error) {
	c := &s.caller
	if !c.inTx {
		panic("isequencer: Next: no Sequencing Transaction in progress")
	}
	k := c.txKind
	if k == nil {
		return 0, fmt.Errorf("%w: SeqID %d: WSKind of WSID %d is not in SeqTypes", ErrUnknownSeqID, seqID, c.txWS)
	}
	i := k.index(seqID)
	if i < 0 {
		return 0, fmt.Errorf("%w: SeqID %d is not defined for WSKind %d", ErrUnknownSeqID, seqID, k.kind)
	}
	if c.txNums == nil {
		nums, err := s.load(k)
		if err != nil {
			return 0, err
		}
		c.txNums = nums
	}
	last := c.txNums[i]
	if last == math.MaxUint64 {
		return 0, fmt.Errorf("%w: WSID %d SeqID %d reached %d", ErrNumberOverflow, c.txWS, seqID, last)
	}
	n := max(last+1, k.init[i])
	c.txNums[i] = n
	c.txTaken = append(c.txTaken, SeqValue{Key: NumberKey{WSID: c.txWS, SeqID: seqID}, Value: n})
	return n, nil
}

// load returns the cache entry of the transaction's workspace, reading all
// sequences of its kind with one ReadNumbers call on a miss. Values that
// are accepted but not yet written override the stored ones.
func (s *Sequencer) load(k *kindInfo) ([]Number, error) {
	c := &s.caller
	nums, kind, cached := c.cache.get(c.txWS)
	if cached && kind == k.kind {
		return nums, nil
	}
	// Take the overlay before reading storage: a value leaves the overlay
	// only after it is durable, so overlay-then-read misses nothing. The
	// workspace's values in the ring lie below the position the cache kept
	// for it (none if it kept none); a workspace cached under another kind
	// is rare: scan it all.
	upTo := c.tail
	if !cached {
		upTo = min(c.cache.pending(c.txWS), c.tail)
	}
	overlay := c.overlayBuf[:len(k.ids)]
	s.overlay(c.txWS, k, overlay, upTo)
	stored, ok := s.readAhead.take(c.txWS, k.kind) // after the overlay
	if !ok {
		var err error
		stored, err = s.p.SeqStorage.ReadNumbers(c.txWS, k.ids)
		if err != nil {
			s.m.StorageError(opReadNumbers)
			return nil, fmt.Errorf("%w: WSID %d: %w", ErrReadNumbers, c.txWS, err)
		}
		if len(stored) != len(k.ids) {
			s.m.StorageError(opReadNumbers)
			return nil, fmt.Errorf("%w: WSID %d: storage returned %d numbers for %d SeqIDs", ErrReadNumbers, c.txWS, len(stored), len(k.ids))
		}
	}
	s.readAhead.cacheMu.Lock()
	nums = c.cache.add(c.txWS, k.kind, s.shared.ringHead.v.Load())
	s.readAhead.cacheMu.Unlock()
	for i := range k.ids {
		nums[i] = max(stored[i], overlay[i])
	}
	return nums, nil
}

// unflushedValues is the number of accepted values not yet durable.
// Caller-side.
func (s *Sequencer) unflushedValues() int64 {
	return int64(s.caller.tail-s.shared.ringHead.v.Load()) + s.shared.overflowN.Load()
}

// overlay sets dst[i] to the largest accepted-but-unwritten value of
// (ws, k.ids[i]), or 0, reading the ring below upTo only. Caller-side.
func (s *Sequencer) overlay(ws WSID, k *kindInfo, dst []Number, upTo uint64) {
	clear(dst)
	add := func(v SeqValue) {
		if v.Key.WSID != ws {
			return
		}
		if i := k.index(v.Key.SeqID); i >= 0 && v.Value > dst[i] {
			dst[i] = v.Value
		}
	}
	for i := s.shared.ringHead.v.Load(); i < upTo; i++ {
		add(*s.caller.values.at(i))
	}
	if s.shared.overflowN.Load() == 0 && !s.shared.hasRecovered.Load() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.mu.overflow {
		add(v)
	}
	for _, v := range s.mu.overflowTaken {
		add(v)
	}
	if rec := s.mu.recovered; len(rec) > 0 {
		for i, id := range k.ids {
			if v := rec[NumberKey{WSID: ws, SeqID: id}]; v > dst[i] {
				dst[i] = v
			}
		}
	}
}

// Flush implements ISequencer.
func (s *Sequencer) Flush() {
	c := &s.caller
	if !c.inTx {
		panic("isequencer: Flush: no Sequencing Transaction in progress")
	}
	c.inTx = false
	c.txNums = nil
	c.nextOffset++
	if n := uint64(len(c.txTaken)); n > 0 {
		head := s.shared.ringHead.v.Load()
		if need := c.tail + n - head; need > c.values.size() && need <= s.ringLimit {
			c.values = c.values.grow(need, s.ringLimit, head, c.tail)
			s.shared.values.Store(c.values)
		}
		if c.tail+n-head <= c.values.size() {
			for i, v := range c.txTaken {
				*c.values.at(c.tail + uint64(i)) = v
			}
			c.tail += n
			// The transaction's workspace is the cache entry returned
			// last (its load): see load.
			c.cache.markLast(c.tail)
		} else {
			s.mu.Lock()
			s.mu.overflow = append(s.mu.overflow, c.txTaken...)
			if s.mu.overflowMinNext == 0 {
				s.mu.overflowMinNext = c.nextOffset
			}
			s.mu.overflowMaxNext = c.nextOffset
			s.mu.Unlock()
			s.shared.overflowN.Add(int64(n))
		}
	}
	c.txTaken = c.txTaken[:0]
	// Start admitted the transaction with a free mark below marksLimit:
	// grow into it if the ring is full.
	if mh := s.shared.markHead.v.Load(); c.markTail-mh >= c.marks.size() {
		c.marks = c.marks.grow(c.markTail-mh+1, s.marksLimit, mh, c.markTail)
		s.shared.marks.Store(c.marks)
	}
	*c.marks.at(c.markTail) = txMark{next: c.nextOffset, tail: c.tail}
	c.markTail++
	s.shared.markTailPub.v.Store(c.markTail)
	if s.tentative {
		return // nothing to write until Durable covers the mark
	}
	// The caller wrote the event before Flush: the mark is durable (after
	// it is published: see sharedState). Without GroupCommit only the
	// caller moves the watermark (endActualize sets it while the caller is
	// locked out), so a store suffices.
	s.shared.watermark.v.Store(uint64(c.nextOffset))
	if s.shared.parked.v.Load() {
		s.wake()
	}
}

// NextOffset returns the PLog offset the next transaction (or Skip) takes;
// ok is false while the sequencer is actualizing or closed (the offset is
// not known yet). Like Start it is called by the caller's goroutine,
// outside a transaction. With DurableNext equal to it, nothing taken is in
// flight.
func (s *Sequencer) NextOffset() (PLogOffset, bool) {
	if s.shared.state.Load() != 0 {
		return 0, false
	}
	return s.caller.nextOffset, true
}

// Skip takes the next PLog offset for a gap marker that also covers the n
// offsets after it (n >= 1), outside of a Sequencing Transaction: it
// returns the marker's offset, and the next transaction's offset is the
// marker's + n + 1. Like Start it returns (0, false) while the sequencer
// is actualizing, closed or over its limits; like Flush it is durable
// when written (the caller reports Durable past the gap, with
// Params.GroupCommit), and an Actualize before that discards it. It
// panics inside a transaction or with n == 0 (documented misuse).
func (s *Sequencer) Skip(n uint64) (PLogOffset, bool) {
	c := &s.caller
	if c.inTx {
		panic("isequencer: Skip: a Sequencing Transaction is in progress")
	}
	if n == 0 {
		panic("isequencer: Skip: n == 0")
	}
	if s.shared.state.Load() != 0 || s.overLimits() {
		return 0, false
	}
	off := c.nextOffset
	c.nextOffset += PLogOffset(n)
	c.inTx, c.txNums = true, nil
	c.txTaken = c.txTaken[:0]
	s.Flush() // no values: the mark of the offsets, as a transaction's
	return off, true
}

// panicDurableWithoutGroupCommit is the value Durable panics with on a
// sequencer made without Params.GroupCommit.
const panicDurableWithoutGroupCommit = "isequencer: Durable: the sequencer was not made with Params.GroupCommit"

// txMark is one flushed transaction: its next
// offset and the ring tail after its values.
type txMark struct {
	next PLogOffset
	tail uint64
}

// Durable implements IGroupCommit. It panics if the sequencer was not made
// with Params.GroupCommit: Flush then reports each event durable itself,
// and a Durable past it would have values and offsets written for events
// that were never flushed.
func (s *Sequencer) Durable(next PLogOffset) {
	if !s.tentative {
		panic(panicDurableWithoutGroupCommit)
	}
	for {
		w := s.shared.watermark.v.Load()
		if uint64(next) <= w {
			return
		}
		if s.shared.watermark.v.CompareAndSwap(w, uint64(next)) {
			break
		}
	}
	if s.shared.parked.v.Load() {
		s.wake()
	}
}

// Cancel implements ISequencer. Nothing of the transaction left the caller's
// state: its values reach the ring only in Flush, and its offset only in
// Flush's nextOffset++. What it changed is the cache entry of its
// workspace (txNums), which holds the numbers it took: dropping the entry
// makes the next cache miss rebuild it from storage and the overlay, which
// covers every value accepted before and not yet durable.
func (s *Sequencer) Cancel() {
	c := &s.caller
	if !c.inTx {
		panic("isequencer: Cancel: no Sequencing Transaction in progress")
	}
	if len(c.txTaken) > 0 {
		s.readAhead.cacheMu.Lock()
		c.cache.remove(c.txWS, s.shared.ringHead.v.Load())
		s.readAhead.cacheMu.Unlock()
	}
	c.inTx = false
	c.txNums = nil
	c.txTaken = c.txTaken[:0]
}

// Actualize implements ISequencer.
func (s *Sequencer) Actualize() {
	st := s.shared.state.Load()
	if st&stateActualizing != 0 {
		panic("isequencer: Actualize: actualization is already in progress")
	}
	s.caller.inTx = false
	s.caller.txNums = nil
	s.caller.txTaken = s.caller.txTaken[:0]
	if st&stateClosed != 0 {
		return
	}
	s.shared.state.Or(stateActualizing)
	s.shared.actualizeReq.Store(true)
	s.wake()
}

func compareSeqValueKey(v SeqValue, k NumberKey) int {
	switch {
	case v.Key.WSID < k.WSID:
		return -1
	case v.Key.WSID > k.WSID:
		return 1
	case v.Key.SeqID < k.SeqID:
		return -1
	case v.Key.SeqID > k.SeqID:
		return 1
	}
	return 0
}

func compareSeqValues(a, b SeqValue) int { return compareSeqValueKey(a, b.Key) }

// Storage operation names reported to Metrics.StorageError.
const (
	opReadNumbers        = "ReadNumbers"
	opReadNextPLogOffset = "ReadNextPLogOffset"
	opWriteValues        = "WriteValuesAndNextPLogOffset"
	opActualizeFromPLog  = "ActualizeSequencesFromPLog"
)

type nopMetrics struct{}

func (nopMetrics) Transaction()                  {}
func (nopMetrics) Busy(BusyReason)               {}
func (nopMetrics) Unflushed(int)                 {}
func (nopMetrics) Flushed(int, time.Duration)    {}
func (nopMetrics) Actualized(int, time.Duration) {}
func (nopMetrics) StorageError(string)           {}
