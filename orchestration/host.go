// Package orchestration runs a host's services only while the host holds a
// leadership slot (the reference platform's VVM orchestration).
//
// A Host takes the first free slot in [1, NumVVM] (elections key = slot,
// value = IP) within AcquisitionTimeout, then runs its services with the
// slot's Assignment. Every problem (no slot in time, leadership lost, a
// service failing) goes through one place, is reported once, and cancels
// the context Launch returned; the caller then calls Shutdown.
//
// Goroutines, each with an owner that cancels it and then waits for it:
//
//	Launch (caller's goroutine)
//	  shutdowner      waits for Shutdown, then stops services, the monitor
//	                  and the elections, in that order
//	  services        one per Service; ctx cancelled on Shutdown or loss
//	  leadershipMonitor  reports a loss; starts the killer
//	    killer        after KillThreshold, calls Kill; never stopped
package orchestration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cqlseq/cqlseq/elections"
)

// Sentinel errors; compare with errors.Is.
var (
	// ErrAcquisitionTimeout: no slot could be taken within the acquisition
	// timeout.
	ErrAcquisitionTimeout = errors.New("orchestration: no slot acquired within the acquisition timeout")

	// ErrLeadershipLost: the slot's leadership was lost; the error also
	// wraps the elections cause (elections.ErrLost).
	ErrLeadershipLost = errors.New("orchestration: leadership lost")

	// ErrServiceFailed: a service returned or panicked before it was told
	// to stop.
	ErrServiceFailed = errors.New("orchestration: service failed")

	// ErrShutdown is the cause of the services' context on Shutdown.
	ErrShutdown = errors.New("orchestration: shut down")

	// ErrNotLaunched: Shutdown before Launch.
	ErrNotLaunched = errors.New("orchestration: not launched")
)

// Host runs services while it holds a slot. Launch it once, then Shutdown
// it (once or more).
type Host struct {
	cfg      Config
	launched atomic.Bool

	problemCtx    context.Context // cancelled (cause: the problem) by updateProblem
	problemCancel context.CancelCauseFunc
	problemOnce   sync.Once

	shutReqCtx     context.Context // cancelled by Shutdown
	shutReqCancel  context.CancelFunc
	monitorCtx     context.Context // cancelled once the services have stopped
	monitorCancel  context.CancelFunc
	shutdownedCtx  context.Context // cancelled when everything has stopped
	shutdownedDone context.CancelFunc
	launchDone     chan struct{} // closed when Launch returns

	// Set by Launch before launchDone is closed; read by the shutdowner
	// after it.
	elections      *elections.Elections
	servicesCancel context.CancelCauseFunc
	servicesWG     sync.WaitGroup
	monitorWG      sync.WaitGroup

	mu struct {
		sync.Mutex
		problem error
	}
}

// New returns a Host; it launches nothing.
func New(cfg Config) (*Host, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Services = append([]Service(nil), cfg.Services...)
	h := &Host{cfg: cfg, launchDone: make(chan struct{})}
	h.problemCtx, h.problemCancel = context.WithCancelCause(context.Background())
	h.shutReqCtx, h.shutReqCancel = context.WithCancel(context.Background())
	h.monitorCtx, h.monitorCancel = context.WithCancel(context.Background())
	h.shutdownedCtx, h.shutdownedDone = context.WithCancel(context.Background())
	return h, nil
}

// Launch takes a slot and starts the services. It blocks until a slot is
// taken, AcquisitionTimeout has passed, or Shutdown is called (from another
// goroutine). It returns the problem context: cancelled, with the problem
// as its cause (context.Cause), when the host can no longer do its work.
// Calling Launch twice is a protocol error and panics.
func (h *Host) Launch() (problemCtx context.Context) {
	if !h.launched.CompareAndSwap(false, true) {
		panic("orchestration: Launch called twice")
	}
	go h.shutdowner()
	defer close(h.launchDone)
	acquired, err := h.tryToAcquireLeadership()
	if acquired != nil {
		h.startServices(acquired)
	}
	if err != nil {
		h.updateProblem(err)
	}
	return h.problemCtx
}

// Shutdown stops the services, the leadership monitor and the elections
// (releasing the slot), waits for all of them, and returns the problem
// reported, if any. It may be called at any time after Launch has started,
// also while Launch blocks, and more than once.
func (h *Host) Shutdown() error {
	if !h.launched.Load() {
		return ErrNotLaunched
	}
	h.shutReqCancel()
	<-h.shutdownedCtx.Done()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mu.problem
}

// shutdowner waits for Shutdown, then stops everything but the killer.
func (h *Host) shutdowner() {
	<-h.shutReqCtx.Done()
	<-h.launchDone
	if h.servicesCancel != nil {
		h.servicesCancel(ErrShutdown)
	}
	h.servicesWG.Wait()
	h.monitorCancel()
	h.monitorWG.Wait()
	if h.elections != nil {
		h.elections.Cleanup()
	}
	h.shutdownedDone()
}

// updateProblem records the first problem and cancels the problem context;
// later problems are only logged.
func (h *Host) updateProblem(err error) {
	first := false
	h.problemOnce.Do(func() {
		first = true
		h.mu.Lock()
		h.mu.problem = err
		h.mu.Unlock()
		h.problemCancel(err)
	})
	if first {
		h.cfg.Logger.Error("orchestration: problem", "err", err)
	} else {
		h.cfg.Logger.Warn("orchestration: further problem (not reported)", "err", err)
	}
}

// tryToAcquireLeadership takes the first free slot, retrying rounds over
// all slots until AcquisitionTimeout. acquired is false without error when
// Shutdown interrupted it.
func (h *Host) tryToAcquireLeadership() (acquired *Assignment, err error) {
	c := &h.cfg
	e, err := elections.NewOverStorage(c.Storage, elections.Options{Clock: c.Clock, Skew: c.Skew, OnEvent: h.onEvent})
	if err != nil {
		return nil, err
	}
	h.elections = e
	deadline := c.Clock.Now().Add(c.AcquisitionTimeout)
	ctx, cancel := context.WithCancelCause(h.shutReqCtx)
	defer cancel(nil)
	timeout := c.Clock.AfterFunc(c.AcquisitionTimeout, func() { cancel(ErrAcquisitionTimeout) })
	defer timeout.Stop()
	var lastErr error
	for {
		for slot := uint32(1); slot <= c.NumVVM && ctx.Err() == nil; slot++ {
			l, err := e.Acquire(ctx, slot, c.IP, c.LeadershipDuration)
			if err == nil {
				return h.assignment(slot, l)
			}
			if ctx.Err() == nil && !errors.Is(err, elections.ErrTaken) {
				lastErr = err
			}
		}
		if h.shutReqCtx.Err() != nil {
			return nil, nil
		}
		now := c.Clock.Now()
		if ctx.Err() != nil || !now.Before(deadline) {
			if lastErr != nil {
				return nil, fmt.Errorf("%w (%v; %d slots; last storage error: %w)", ErrAcquisitionTimeout, c.AcquisitionTimeout, c.NumVVM, lastErr)
			}
			return nil, fmt.Errorf("%w (%v; all %d slots held)", ErrAcquisitionTimeout, c.AcquisitionTimeout, c.NumVVM)
		}
		t := c.Clock.NewTimer(min(c.AcquisitionRetry, deadline.Sub(now)))
		select {
		case <-t.C():
		case <-ctx.Done(): // timeout or Shutdown
			t.Stop()
		}
	}
}

// assignment builds the Assignment of a taken slot and starts the monitor.
func (h *Host) assignment(slot uint32, l *elections.Leadership) (*Assignment, error) {
	parts, err := SlotPartitions(slot, h.cfg.NumVVM, h.cfg.NumPartitions)
	if err != nil {
		return nil, err // unreachable: Config.Validate checked the bounds
	}
	h.cfg.Logger.Info("orchestration: slot acquired", "slot", slot, "epoch", l.Epoch, "partitions", len(parts))
	h.monitorWG.Add(1)
	go h.leadershipMonitor(l)
	return &Assignment{Slot: slot, Epoch: l.Epoch, Partitions: parts, Leadership: l}, nil
}

// startServices runs every service with a context cancelled on Shutdown
// and on leadership loss.
func (h *Host) startServices(a *Assignment) {
	if h.shutReqCtx.Err() != nil {
		return
	}
	var ctx context.Context
	ctx, h.servicesCancel = context.WithCancelCause(a.Leadership.Ctx)
	for _, s := range h.cfg.Services {
		h.servicesWG.Add(1)
		go h.runService(ctx, s, *a)
	}
}

func (h *Host) runService(ctx context.Context, s Service, a Assignment) {
	defer h.servicesWG.Done()
	defer func() {
		if r := recover(); r != nil {
			h.updateProblem(fmt.Errorf("%w: service %q panicked: %v", ErrServiceFailed, s.Name, r))
		}
	}()
	err := s.Run(ctx, a)
	if ctx.Err() != nil {
		return // told to stop; a loss is reported by the monitor
	}
	if err == nil {
		err = errors.New("returned before it was told to stop")
	}
	h.updateProblem(fmt.Errorf("%w: service %q: %w", ErrServiceFailed, s.Name, err))
}

// leadershipMonitor reports a loss of l and starts the killer, unless the
// monitor is stopped first (Shutdown stops it before releasing l).
func (h *Host) leadershipMonitor(l *elections.Leadership) {
	defer h.monitorWG.Done()
	select {
	case <-l.Ctx.Done():
		cause := context.Cause(l.Ctx)
		if h.cfg.KillThreshold > 0 {
			t := h.cfg.Clock.NewTimer(h.cfg.KillThreshold)
			go h.killer(t, cause)
		}
		h.updateProblem(fmt.Errorf("%w: slot %d: %w", ErrLeadershipLost, l.Key, cause))
	case <-h.monitorCtx.Done():
	}
}

// killer calls Kill when t fires. Nothing stops it: after a loss the
// process must exit, and if it has not by then, Kill makes it.
func (h *Host) killer(t elections.Timer, cause error) {
	<-t.C()
	h.cfg.Kill(fmt.Errorf("%w %v ago and the process is still running: %w", ErrLeadershipLost, h.cfg.KillThreshold, cause))
}

func (h *Host) onEvent(ev elections.Event) {
	defer func() {
		if h.cfg.OnEvent != nil {
			h.cfg.OnEvent(ev)
		}
	}()
	switch ev.Kind {
	case elections.EventRenewed:
		h.cfg.Logger.Debug("orchestration: leadership renewed", "slot", ev.Key, "epoch", ev.Epoch)
	case elections.EventRenewFailed:
		h.cfg.Logger.Warn("orchestration: leadership renewal failed", "slot", ev.Key, "epoch", ev.Epoch, "err", ev.Err)
	default:
		h.cfg.Logger.Info("orchestration: leadership "+ev.Kind.String(), "slot", ev.Key, "epoch", ev.Epoch, "err", ev.Err)
	}
}
