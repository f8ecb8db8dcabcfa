package orchestration

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"time"

	"github.com/cqlseq/cqlseq/elections"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/storage"
)

// Default configuration values.
const (
	DefaultLeadershipDuration = 20 * time.Second
	DefaultAcquisitionRetry   = time.Second
)

// Service is one of the work a Host runs while it holds its slot.
type Service struct {
	// Name names the service in problems and logs.
	Name string
	// Run does the service's work until ctx is cancelled: on Shutdown
	// (cause ErrShutdown) or when the leadership is lost (cause wrapping
	// elections.ErrLost). Returning before that, with or without an error,
	// is a problem, as is a panic.
	Run func(ctx context.Context, a Assignment) error
}

// Assignment is what a Host's services own while it holds its slot.
type Assignment struct {
	// Slot is the leadership key held, in [1, NumVVM].
	Slot uint32
	// Epoch is the leadership's epoch: greater than that of every earlier
	// holder of the slot (for fencing).
	Epoch uint64
	// Partitions are the slot's partitions (SlotPartitions).
	Partitions []isequencer.PartitionID
	// Leadership is the held leadership (its Deadline moves on with every
	// renewal).
	Leadership *elections.Leadership
}

// Config configures a Host.
type Config struct {
	// Storage holds the leases (elections.TTLStorage layout). Required.
	Storage storage.Storage

	// NumVVM is the number of slots, i.e. of hosts that can run at once;
	// a host takes the first free slot in [1, NumVVM]. Default 1.
	NumVVM uint32

	// NumPartitions is the number of application partitions spread over
	// the slots (SlotPartitions); 0 to 65536. Default 0.
	NumPartitions int

	// IP is this host's address: the leadership value other hosts see.
	// Required.
	IP net.IP

	// LeadershipDuration is the lease duration: whole seconds, more than
	// Skew. Default 20 s.
	LeadershipDuration time.Duration

	// AcquisitionTimeout bounds Launch's attempts to take a slot. Default
	// twice LeadershipDuration, so that a slot whose holder died is freed
	// (by its lease's TTL) within it.
	AcquisitionTimeout time.Duration

	// AcquisitionRetry is the pause between rounds over all slots.
	// Default 1 s.
	AcquisitionRetry time.Duration

	// Services run while the slot is held, each in its own goroutine.
	Services []Service

	// Clock measures leases and timeouts. Default elections.SystemClock().
	Clock elections.Clock

	// Skew is the elections' Options.Skew. Default elections.DefaultSkew.
	Skew time.Duration

	// KillThreshold is how long after a leadership loss Kill is called if
	// the process is still alive. 0: LeadershipDuration/4; negative: never.
	// The killer goroutine is the one goroutine Shutdown does not stop: the
	// process is expected to exit after a loss. A host that keeps the
	// process running after a loss (to launch a new Host, say) must set a
	// negative KillThreshold.
	KillThreshold time.Duration

	// Kill ends the process. Default KillProcess.
	Kill func(reason error)

	// Logger receives leadership events and problems. Default
	// slog.Default().
	Logger *slog.Logger

	// OnEvent, when set, is also told of every leadership event (see
	// elections.Options.OnEvent); it must neither block nor call the Host.
	OnEvent func(elections.Event)
}

// KillProcess writes reason to stderr and exits the process with status 1.
func KillProcess(reason error) {
	fmt.Fprintf(os.Stderr, "orchestration: killing the process: %v\n", reason)
	os.Exit(1)
}

// EnsureDefaults fills zero fields with their defaults.
func (c *Config) EnsureDefaults() {
	if c.NumVVM == 0 {
		c.NumVVM = 1
	}
	if c.LeadershipDuration == 0 {
		c.LeadershipDuration = DefaultLeadershipDuration
	}
	if c.AcquisitionTimeout == 0 {
		c.AcquisitionTimeout = 2 * c.LeadershipDuration
	}
	if c.AcquisitionRetry == 0 {
		c.AcquisitionRetry = DefaultAcquisitionRetry
	}
	if c.Clock == nil {
		c.Clock = elections.SystemClock()
	}
	if c.Skew == 0 {
		c.Skew = elections.DefaultSkew
	}
	if c.KillThreshold == 0 {
		c.KillThreshold = c.LeadershipDuration / 4
	}
	if c.Kill == nil {
		c.Kill = KillProcess
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Validate reports every invalid field at once; each error wraps
// storage.ErrInvalidArgument.
func (c *Config) Validate() error {
	var errs []error
	bad := func(f string, a ...any) {
		errs = append(errs, fmt.Errorf("orchestration: %w: "+f, append([]any{storage.ErrInvalidArgument}, a...)...))
	}
	if c.Storage == nil {
		bad("Storage is nil")
	}
	if c.NumVVM == 0 {
		bad("NumVVM is 0")
	}
	if c.NumPartitions < 0 || c.NumPartitions > math.MaxUint16+1 {
		bad("NumPartitions %d outside [0, %d]", c.NumPartitions, math.MaxUint16+1)
	}
	if len(c.IP) == 0 {
		bad("IP is empty")
	}
	eo := elections.Options{Clock: c.Clock, Skew: c.Skew, ReleaseTimeout: elections.DefaultReleaseTimeout}
	if err := eo.Validate(); err != nil {
		errs = append(errs, err)
	} else if _, err := eo.TimingFor(c.LeadershipDuration); err != nil {
		errs = append(errs, err)
	}
	if c.AcquisitionTimeout <= 0 {
		bad("AcquisitionTimeout %v is not positive", c.AcquisitionTimeout)
	}
	if c.AcquisitionRetry <= 0 {
		bad("AcquisitionRetry %v is not positive", c.AcquisitionRetry)
	}
	for i, s := range c.Services {
		if s.Run == nil {
			bad("service %d (%q) has no Run", i, s.Name)
		}
	}
	if c.Kill == nil {
		bad("Kill is nil")
	}
	if c.Logger == nil {
		bad("Logger is nil")
	}
	return errors.Join(errs...)
}
