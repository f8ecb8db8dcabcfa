package elections

import (
	"errors"
	"fmt"
	"time"

	"github.com/cqlseq/cqlseq/storage"
)

// Default option values.
const (
	DefaultSkew           = time.Second
	DefaultReleaseTimeout = 5 * time.Second
)

// Options configure an Elections.
type Options struct {
	// Clock measures leases and schedules renewals. Default SystemClock().
	Clock Clock

	// Skew is taken off every lease when it is measured locally: a lease of
	// duration d whose write began at local time t is held until t+d-Skew.
	// It covers CQL's whole-second TTL accounting (a row written at 10.9 s
	// with a TTL of 3 s expires at 13 s) and differences in clock rates, so
	// that a holder gives the leadership up before the store lets anyone
	// else take it. Every lease duration must exceed it. Default 1 s.
	Skew time.Duration

	// ReleaseTimeout bounds the storage calls that delete a lease in
	// ReleaseLeadership and Cleanup (and after a failed acquisition).
	// Default 5 s.
	ReleaseTimeout time.Duration

	// OnEvent, when set, is told of every acquisition, renewal, failed
	// renewal, loss and release. It is called from the goroutine that made
	// the change and must neither block nor call the Elections.
	OnEvent func(Event)
}

// EnsureDefaults fills zero fields with their defaults.
func (o *Options) EnsureDefaults() {
	if o.Clock == nil {
		o.Clock = SystemClock()
	}
	if o.Skew == 0 {
		o.Skew = DefaultSkew
	}
	if o.ReleaseTimeout == 0 {
		o.ReleaseTimeout = DefaultReleaseTimeout
	}
}

// Validate reports every invalid field at once; each error wraps
// storage.ErrInvalidArgument.
func (o *Options) Validate() error {
	var errs []error
	if o.Clock == nil {
		errs = append(errs, fmt.Errorf("elections: %w: Clock is nil", storage.ErrInvalidArgument))
	}
	if o.Skew < 0 {
		errs = append(errs, fmt.Errorf("elections: %w: Skew %v is negative", storage.ErrInvalidArgument, o.Skew))
	}
	if o.ReleaseTimeout <= 0 {
		errs = append(errs, fmt.Errorf("elections: %w: ReleaseTimeout %v is not positive", storage.ErrInvalidArgument, o.ReleaseTimeout))
	}
	return errors.Join(errs...)
}

// Timing is how one lease duration is used.
type Timing struct {
	// Duration is the TTL written with the lease.
	Duration time.Duration
	// Validity is how long after a write began the lease counts as held
	// locally: Duration - Skew.
	Validity time.Duration
	// RenewEvery is the time from one renewal's start to the next:
	// Validity / 3, leaving two thirds of the validity for retries.
	RenewEvery time.Duration
	// RetryEvery is the time from a failed renewal's start to its retry:
	// Validity / 12.
	RetryEvery time.Duration
}

// TimingFor returns the timing of a lease of duration d, or an error
// wrapping storage.ErrInvalidArgument when d is not a whole number of
// seconds, at least 1 s, greater than o.Skew.
func (o *Options) TimingFor(d time.Duration) (Timing, error) {
	if err := storage.ValidateTTL(d); err != nil {
		return Timing{}, fmt.Errorf("elections: lease duration: %w", err)
	}
	if d <= o.Skew {
		return Timing{}, fmt.Errorf("elections: %w: lease duration %v must exceed Skew %v", storage.ErrInvalidArgument, d, o.Skew)
	}
	v := d - o.Skew
	return Timing{Duration: d, Validity: v, RenewEvery: v / 3, RetryEvery: v / 12}, nil
}

// EventKind says what happened to a leadership.
type EventKind uint8

// Event kinds.
const (
	EventAcquired EventKind = iota + 1
	EventRenewed
	EventRenewFailed // Err: the storage error; the renewal is retried
	EventLost        // Err: the cause (wraps ErrLost)
	EventReleased    // Err: the error deleting the lease, if any
)

func (k EventKind) String() string {
	switch k {
	case EventAcquired:
		return "acquired"
	case EventRenewed:
		return "renewed"
	case EventRenewFailed:
		return "renew-failed"
	case EventLost:
		return "lost"
	case EventReleased:
		return "released"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one change of a leadership, for Options.OnEvent.
type Event struct {
	Key   uint32
	Epoch uint64
	Kind  EventKind
	Err   error
}
