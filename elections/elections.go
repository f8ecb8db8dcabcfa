// Package elections hands out leaderships: time-limited leases, one holder
// per key, kept alive by a renewal goroutine and stored through an
// ITTLStorage (TTLStorage puts them in a storage.Storage).
//
// A lease of duration d is written with a TTL of d and counted as held
// locally for d - Options.Skew from the moment its write (or last renewal)
// began, by the local monotonic clock; it is renewed every third of that.
// When renewals fail until that local deadline, or find the lease no longer
// theirs, the leadership is lost: its context is cancelled with a cause
// wrapping ErrLost, before the store can let another holder in.
//
// Every acquisition of a key gets an epoch greater than every earlier
// acquisition's: the key's epoch row (which has no TTL) is incremented with
// a compare-and-set after the lease is taken, and records the nonce of the
// acquisition that set it. An acquisition that fails after its increment
// leaves a gap. Fencing tokens are built on it.
package elections

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cqlseq/cqlseq/storage"
)

// Elections implements IElections[uint32, []byte]. Its methods are safe for
// concurrent use. Cleanup must be called when it is no longer needed.
type Elections struct {
	st          ITTLStorage[RowKey, []byte]
	o           Options
	closeCtx    context.Context // cancelled by Cleanup: aborts acquisitions in flight
	closeCancel context.CancelFunc
	// wg counts acquisitions in flight and renewal goroutines; Add only
	// under mu while !mu.closed.
	wg sync.WaitGroup
	mu struct {
		sync.Mutex
		closed bool
		// held maps a key to its leadership; nil while it is being
		// acquired.
		held map[uint32]*Leadership
	}
}

var _ IElections[uint32, []byte] = (*Elections)(nil)

// New returns an Elections over st.
func New(st ITTLStorage[RowKey, []byte], o Options) (*Elections, error) {
	o.EnsureDefaults()
	errs := []error{o.Validate()}
	if st == nil {
		errs = append(errs, fmt.Errorf("elections: %w: nil ITTLStorage", storage.ErrInvalidArgument))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	e := &Elections{st: st, o: o}
	e.closeCtx, e.closeCancel = context.WithCancel(context.Background())
	e.mu.held = map[uint32]*Leadership{}
	return e, nil
}

// NewOverStorage returns an Elections over a TTLStorage over st.
func NewOverStorage(st storage.Storage, o Options) (*Elections, error) {
	ts, err := NewTTLStorage(st)
	if err != nil {
		return nil, err
	}
	return New(ts, o)
}

// Leadership is one held leadership. Ctx is cancelled when it is lost or
// released; context.Cause(Ctx) wraps ErrLost or is ErrReleased (or
// ErrAbandoned after Abandon).
type Leadership struct {
	Key   uint32
	Epoch uint64
	Ctx   context.Context

	cancel context.CancelCauseFunc
	timing Timing
	value  []byte // the stored lease value
	nonce  nonce
	done   chan struct{} // closed when the renewal goroutine has returned
	mu     struct {
		sync.Mutex
		deadline time.Time
		timer    Timer // cancels Ctx at deadline
	}
}

// Deadline returns the local time until which the lease is held for sure;
// it moves on with every renewal.
func (l *Leadership) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.deadline
}

// Timing returns how the lease is timed.
func (l *Leadership) Timing() Timing { return l.timing }

// Acquire tries once to become the leader of key with val for duration
// (whole seconds, more than Options.Skew). It returns ErrTaken when another
// holder has the key, ErrHeld when this Elections holds or is acquiring it,
// ErrClosed after Cleanup, or a storage error. It takes at most the lease's
// validity: an acquisition that has not completed by then fails, so a
// returned Leadership always has time left.
func (e *Elections) Acquire(ctx context.Context, key uint32, val []byte, duration time.Duration) (*Leadership, error) {
	tm, err := e.o.TimingFor(duration)
	if err != nil {
		return nil, err
	}
	if err := e.reserve(key); err != nil {
		return nil, err
	}
	l, err := e.acquire(ctx, key, val, tm)
	if err != nil {
		e.mu.Lock()
		delete(e.mu.held, key)
		e.mu.Unlock()
		e.wg.Done()
		return nil, err
	}
	t := e.o.Clock.NewTimer(l.Deadline().Add(l.timing.RenewEvery - l.timing.Validity).Sub(e.o.Clock.Now()))
	e.emit(Event{Key: key, Epoch: l.Epoch, Kind: EventAcquired})
	go e.renew(l, t)
	return l, nil
}

// AcquireLeadership implements IElections: Acquire without a context,
// returning the leadership's context or nil.
func (e *Elections) AcquireLeadership(key uint32, val []byte, duration time.Duration) context.Context {
	l, err := e.Acquire(context.Background(), key, val, duration)
	if err != nil {
		return nil
	}
	return l.Ctx
}

// reserve marks key as being acquired and counts the acquisition in wg.
func (e *Elections) reserve(key uint32) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.closed {
		return ErrClosed
	}
	if _, ok := e.mu.held[key]; ok {
		return fmt.Errorf("%w: key %d", ErrHeld, key)
	}
	e.mu.held[key] = nil
	e.wg.Add(1)
	return nil
}

var errAcquireDeadline = errors.New("elections: acquisition did not complete within the lease's validity")

// acquire takes the lease, bumps the epoch and registers the leadership. On
// failure it deletes whatever lease it may have written.
func (e *Elections) acquire(ctx context.Context, key uint32, val []byte, tm Timing) (*Leadership, error) {
	start := e.o.Clock.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopOnClose := context.AfterFunc(e.closeCtx, func() { cancel(ErrClosed) })
	defer stopOnClose()
	expiry := e.o.Clock.AfterFunc(tm.Validity, func() { cancel(errAcquireDeadline) })
	defer expiry.Stop()

	l := &Leadership{Key: key, timing: tm, nonce: newNonce(), done: make(chan struct{})}
	l.value = encodeLease(l.nonce, val)

	epochRaw, found, err := e.st.Get(ctx, RowKey{key, RowEpoch})
	if err != nil {
		return nil, e.acquireErr(ctx, key, err)
	}
	var epoch uint64
	if found {
		if epoch, _, err = decodeEpoch(epochRaw); err != nil {
			return nil, fmt.Errorf("elections: key %d: %w", key, err)
		}
	}
	if err := e.insertLease(ctx, l); err != nil {
		if !errors.Is(err, ErrTaken) {
			e.deleteLeaseAfterFailure(l)
		}
		return nil, e.acquireErr(ctx, key, err)
	}
	if l.Epoch, err = e.bumpEpoch(ctx, l, epochRaw, found, epoch); err != nil {
		e.deleteLeaseAfterFailure(l)
		return nil, e.acquireErr(ctx, key, err)
	}

	l.Ctx, l.cancel = context.WithCancelCause(context.Background())
	l.mu.deadline = start.Add(tm.Validity)
	l.mu.timer = e.o.Clock.AfterFunc(l.mu.deadline.Sub(e.o.Clock.Now()), l.expire)

	e.mu.Lock()
	closed := e.mu.closed
	if !closed {
		e.mu.held[key] = l
	}
	e.mu.Unlock()
	if closed || ctx.Err() != nil {
		l.mu.timer.Stop()
		l.cancel(ErrReleased)
		e.deleteLeaseAfterFailure(l)
		if closed {
			return nil, ErrClosed
		}
		return nil, e.acquireErr(ctx, key, ctx.Err())
	}
	return l, nil
}

// acquireErr prefers the reason ctx was cancelled over the error it caused.
func (e *Elections) acquireErr(ctx context.Context, key uint32, err error) error {
	if errors.Is(err, ErrTaken) {
		return err
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		if errors.Is(cause, ErrClosed) {
			return ErrClosed
		}
		return fmt.Errorf("elections: acquiring key %d: %w (%w)", key, cause, err)
	}
	return fmt.Errorf("elections: acquiring key %d: %w", key, err)
}

// insertLease writes l's lease if the key has none. Since the value is
// unique to l, an unknown or negative outcome is resolved by reading: the
// row holding l's value means it was written.
func (e *Elections) insertLease(ctx context.Context, l *Leadership) error {
	k := RowKey{l.Key, RowLease}
	for {
		ok, err := e.st.InsertIfNotExist(ctx, k, l.value, l.timing.Duration)
		if err == nil && ok {
			return nil
		}
		if err != nil && !errors.Is(err, storage.ErrUnknownOutcome) {
			return err
		}
		cur, found, rerr := e.st.Get(ctx, k)
		switch {
		case rerr != nil:
			return rerr
		case found && bytes.Equal(cur, l.value):
			return nil
		case found:
			return fmt.Errorf("%w: key %d", ErrTaken, l.Key)
		}
		// Not there: the insert was not applied (or the holder's lease
		// has just expired); try again.
	}
}

// bumpEpoch sets the epoch row from its last read state (raw, found, epoch)
// to epoch+1 with l's nonce, rereading after every race or unknown outcome.
func (e *Elections) bumpEpoch(ctx context.Context, l *Leadership, raw []byte, found bool, epoch uint64) (uint64, error) {
	k := RowKey{l.Key, RowEpoch}
	for {
		next := encodeEpoch(epoch+1, l.nonce)
		var ok bool
		var err error
		if found {
			ok, err = e.st.CompareAndSwap(ctx, k, raw, next, 0)
		} else {
			ok, err = e.st.InsertIfNotExist(ctx, k, next, 0)
		}
		if err == nil && ok {
			return epoch + 1, nil
		}
		if err != nil && !errors.Is(err, storage.ErrUnknownOutcome) {
			return 0, err
		}
		if raw, found, err = e.st.Get(ctx, k); err != nil {
			return 0, err
		}
		epoch = 0
		if found {
			var n nonce
			if epoch, n, err = decodeEpoch(raw); err != nil {
				return 0, fmt.Errorf("elections: key %d: %w", l.Key, err)
			}
			if n == l.nonce {
				return epoch, nil
			}
		}
	}
}

// deleteLeaseAfterFailure removes a lease an acquisition may have written.
func (e *Elections) deleteLeaseAfterFailure(l *Leadership) {
	ctx, cancel := context.WithTimeout(context.Background(), e.o.ReleaseTimeout)
	defer cancel()
	_ = e.deleteLease(ctx, l)
}

// deleteLease deletes l's lease if it is still l's, resolving unknown
// outcomes by reading.
func (e *Elections) deleteLease(ctx context.Context, l *Leadership) error {
	k := RowKey{l.Key, RowLease}
	for {
		_, err := e.st.CompareAndDelete(ctx, k, l.value)
		if err == nil {
			return nil
		}
		if !errors.Is(err, storage.ErrUnknownOutcome) {
			return err
		}
		cur, found, rerr := e.st.Get(ctx, k)
		if rerr != nil {
			return rerr
		}
		if !found || !bytes.Equal(cur, l.value) {
			return nil
		}
	}
}

// expire is l's deadline timer function.
func (l *Leadership) expire() {
	l.cancel(fmt.Errorf("%w: lease of key %d not renewed by its local deadline", ErrLost, l.Key))
}

// extend moves l's deadline to d unless the old one has passed.
func (l *Leadership) extend(c Clock, d time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.mu.timer.Stop() || l.Ctx.Err() != nil {
		return false
	}
	l.mu.deadline = d
	l.mu.timer = c.AfterFunc(d.Sub(c.Now()), l.expire)
	return true
}

// renew is l's renewal goroutine: it compares-and-swaps the lease onto
// itself every RenewEvery, retries a failure RetryEvery after the failed
// attempt began (at once when the attempt took longer: one that waited out
// a silent coordinator leaves less of the validity for the next), and returns
// when l.Ctx is cancelled (by release, by the deadline timer, or by itself
// on finding the lease gone). t is the timer of the first renewal. Each
// next timer is started before the event that reports a renewal, so that
// whoever moves a fake clock on seeing the event moves this timer too.
func (e *Elections) renew(l *Leadership, t Timer) {
	defer e.wg.Done()
	defer close(l.done)
	k := RowKey{l.Key, RowLease}
	for {
		select {
		case <-l.Ctx.Done():
			t.Stop()
			e.stopped(l)
			return
		case <-t.C():
		}
		begin := e.o.Clock.Now()
		ok, err := e.st.CompareAndSwap(l.Ctx, k, l.value, l.value, l.timing.Duration)
		switch {
		case err == nil && ok:
			extended := l.extend(e.o.Clock, begin.Add(l.timing.Validity))
			t = e.o.Clock.NewTimer(begin.Add(l.timing.RenewEvery).Sub(e.o.Clock.Now()))
			if extended {
				e.emit(Event{Key: l.Key, Epoch: l.Epoch, Kind: EventRenewed})
			}
		case err == nil:
			l.cancel(fmt.Errorf("%w: lease of key %d is no longer this holder's", ErrLost, l.Key))
			e.stopped(l)
			return
		default:
			t = e.o.Clock.NewTimer(begin.Add(l.timing.RetryEvery).Sub(e.o.Clock.Now()))
			if l.Ctx.Err() == nil {
				e.emit(Event{Key: l.Key, Epoch: l.Epoch, Kind: EventRenewFailed, Err: err})
			}
		}
	}
}

// stopped ends l's renewal: it stops the deadline timer, forgets l, and
// reports a loss.
func (e *Elections) stopped(l *Leadership) {
	l.mu.Lock()
	l.mu.timer.Stop()
	l.mu.Unlock()
	e.forget(l)
	if cause := context.Cause(l.Ctx); errors.Is(cause, ErrLost) {
		e.emit(Event{Key: l.Key, Epoch: l.Epoch, Kind: EventLost, Err: cause})
	}
}

// forget removes l from the held map if it is still there.
func (e *Elections) forget(l *Leadership) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.held[l.Key] == l {
		delete(e.mu.held, l.Key)
	}
}

// Release gives up key: it cancels the leadership's context (cause
// ErrReleased), waits for its renewal goroutine, then deletes the lease if
// it is still this holder's. A key not held (or still being acquired) is a
// no-op. A failed delete is returned; the lease then expires by its TTL.
func (e *Elections) Release(ctx context.Context, key uint32) error {
	e.mu.Lock()
	l := e.mu.held[key]
	if l != nil {
		delete(e.mu.held, key)
	}
	e.mu.Unlock()
	if l == nil {
		return nil
	}
	l.cancel(ErrReleased)
	<-l.done
	err := e.deleteLease(ctx, l)
	e.emit(Event{Key: key, Epoch: l.Epoch, Kind: EventReleased, Err: err})
	return err
}

// Abandon gives up key without deleting its lease: it cancels the
// leadership's context (cause ErrAbandoned), waits for its renewal
// goroutine and forgets the key, leaving the stored lease to expire by its
// TTL, as after a crash; nobody can acquire key before then, and Cleanup
// does not delete it. For a holder that could not record what its
// successor needs (timeshard's high water). A key not held (or still being
// acquired) is a no-op; no storage call is made.
func (e *Elections) Abandon(key uint32) {
	e.mu.Lock()
	l := e.mu.held[key]
	if l != nil {
		delete(e.mu.held, key)
	}
	e.mu.Unlock()
	if l == nil {
		return
	}
	l.cancel(ErrAbandoned)
	<-l.done
}

// ReleaseLeadership implements IElections: Release bounded by
// Options.ReleaseTimeout.
func (e *Elections) ReleaseLeadership(key uint32) {
	ctx, cancel := context.WithTimeout(context.Background(), e.o.ReleaseTimeout)
	defer cancel()
	_ = e.Release(ctx, key)
}

// Cleanup stops further acquisitions, aborts those in flight, cancels every
// leadership (cause ErrReleased), waits for every goroutine, and then
// deletes the leases, within Options.ReleaseTimeout in all. It returns even
// while the storage fails; later calls return at once.
func (e *Elections) Cleanup() {
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		e.wg.Wait()
		return
	}
	e.mu.closed = true
	var held []*Leadership
	for k, l := range e.mu.held {
		if l != nil {
			held = append(held, l)
			delete(e.mu.held, k)
		}
	}
	e.mu.Unlock()
	e.closeCancel()
	for _, l := range held {
		l.cancel(ErrReleased)
	}
	e.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), e.o.ReleaseTimeout)
	defer cancel()
	for _, l := range held {
		err := e.deleteLease(ctx, l)
		e.emit(Event{Key: l.Key, Epoch: l.Epoch, Kind: EventReleased, Err: err})
	}
}

// Holder is what the store says about a key's leadership.
type Holder struct {
	// Value is the holder's value.
	Value []byte
	// Epoch is the holder's epoch, 0 while its acquisition has not yet
	// recorded one.
	Epoch uint64
}

// Holder reads who holds key; ok is false when nobody does.
func (e *Elections) Holder(ctx context.Context, key uint32) (h Holder, ok bool, err error) {
	raw, ok, err := e.st.Get(ctx, RowKey{key, RowLease})
	if err != nil || !ok {
		return Holder{}, false, err
	}
	n, val, err := decodeLease(raw)
	if err != nil {
		return Holder{}, false, fmt.Errorf("elections: key %d: %w", key, err)
	}
	h.Value = val
	raw, found, err := e.st.Get(ctx, RowKey{key, RowEpoch})
	if err != nil {
		return Holder{}, false, err
	}
	if found {
		epoch, en, err := decodeEpoch(raw)
		if err != nil {
			return Holder{}, false, fmt.Errorf("elections: key %d: %w", key, err)
		}
		if en == n {
			h.Epoch = epoch
		}
	}
	return h, true, nil
}

func (e *Elections) emit(ev Event) {
	if e.o.OnEvent != nil {
		e.o.OnEvent(ev)
	}
}
