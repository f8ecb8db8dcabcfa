package elections

import (
	"context"
	"time"
)

// IElections acquires and keeps leaderships, one per key, in the shape of the
// reference platform's ielections.IElections.
type IElections[K comparable, V any] interface {
	// AcquireLeadership tries once to become the leader of key with val for
	// duration. It returns a context that stays live while the leadership
	// is held and is cancelled when it is lost or released, or nil when the
	// leadership was not acquired (held by another, storage error, bad
	// arguments, cleaned up). A renewal goroutine runs only on success.
	AcquireLeadership(key K, val V, duration time.Duration) (leadershipCtx context.Context)

	// ReleaseLeadership stops the renewal of key, waits for its goroutine,
	// and deletes the lease if it is still this holder's. A key not held is
	// a no-op.
	ReleaseLeadership(key K)
}

// ITTLStorage is the store elections run on: rows that may carry a time to
// live, written with compare-and-set calls. A row whose TTL has passed does
// not exist. A ttl of 0 means no expiry; TTLs are whole seconds.
//
// A conditional call may fail with an error wrapping
// storage.ErrUnknownOutcome: the write may or may not have been applied, and
// the caller resolves it by reading. Elections never retry a conditional
// write blindly: every value they write is unique to one acquisition.
type ITTLStorage[K any, V any] interface {
	// InsertIfNotExist writes (key, val) with ttl only if key does not
	// exist; ok reports whether it was written.
	InsertIfNotExist(ctx context.Context, key K, val V, ttl time.Duration) (ok bool, err error)

	// CompareAndSwap sets key to newVal with ttl (restarting the TTL) only if
	// it exists with oldVal.
	CompareAndSwap(ctx context.Context, key K, oldVal, newVal V, ttl time.Duration) (ok bool, err error)

	// CompareAndDelete deletes key only if it exists with val.
	CompareAndDelete(ctx context.Context, key K, val V) (ok bool, err error)

	// Get reads key.
	Get(ctx context.Context, key K) (val V, ok bool, err error)
}

// Clock is the time elections and orchestration measure leases with. Now
// must carry a monotonic reading (time.Now does), so that wall-clock jumps
// do not stretch a lease.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer whose C receives once, d after now; d <= 0
	// fires at once.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f once, d after now, unless stopped first; f must not
	// block. The returned Timer's C is nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a Clock's timer.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports false when the timer
	// has already fired or been stopped.
	Stop() bool
}
