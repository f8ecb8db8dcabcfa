// Package torture holds the measurements and checks of cqlseq's fault
// campaign (cmd/cqlseq-torture): acknowledgement rates sampled from bench
// ack logs around a fault, the two-owner fencing check, the reading of
// verify's JSON report, and what a bench logged (unknown outcomes, its
// takeovers and their epochs: no epoch taken by two owners). The command
// only wires them to processes and nodes.
package torture

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/cqlseq/cqlseq/plog/plogcheck"
)

// Sample is an ack log's acknowledgement count at an instant.
type Sample struct {
	At   time.Time
	Acks int
}

// Sampler samples an ack log's count every Interval in a goroutine of its
// own, which Stop ends.
type Sampler struct {
	counter  *plogcheck.AckCounter
	interval time.Duration
	cancel   context.CancelFunc
	done     chan struct{}
	mu       struct {
		sync.Mutex
		samples []Sample
		err     error
	}
}

// DefaultSampleInterval is how often the campaign samples an ack log.
const DefaultSampleInterval = 250 * time.Millisecond

// StartSampler samples path's acknowledgements every interval (> 0) until
// Stop or ctx is done. The first sample is taken before it returns.
func StartSampler(ctx context.Context, path string, interval time.Duration) (*Sampler, error) {
	if interval <= 0 {
		return nil, fmt.Errorf("torture: sample interval %v, must be > 0", interval)
	}
	s := &Sampler{counter: plogcheck.NewAckCounter(path), interval: interval, done: make(chan struct{})}
	if err := s.sample(); err != nil {
		return nil, err
	}
	ctx, s.cancel = context.WithCancel(ctx)
	go s.run(ctx)
	return s, nil
}

func (s *Sampler) run(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.sample(); err != nil {
				return
			}
		}
	}
}

func (s *Sampler) sample() error {
	n, err := s.counter.Count()
	at := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.mu.err = err
		return err
	}
	s.mu.samples = append(s.mu.samples, Sample{At: at, Acks: n})
	return nil
}

// Samples returns a copy of the samples so far, and the error that
// stopped the sampling, if any.
func (s *Sampler) Samples() ([]Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Sample(nil), s.mu.samples...), s.mu.err
}

// Last returns the latest sample.
func (s *Sampler) Last() Sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mu.samples[len(s.mu.samples)-1]
}

// Stop ends the sampling goroutine, waits for it and takes a last sample.
// Safe to call more than once.
func (s *Sampler) Stop() {
	s.cancel()
	<-s.done
	s.mu.Lock()
	failed := s.mu.err != nil
	s.mu.Unlock()
	if !failed {
		_ = s.sample()
	}
}

// ErrNoCoverage: the samples do not cover a window.
var ErrNoCoverage = errors.New("torture: the samples do not cover the window")

// countAt returns the acknowledgements at t, interpolated linearly
// between the samples around it. samples are in time order.
func countAt(samples []Sample, t time.Time) (float64, error) {
	if len(samples) == 0 || t.Before(samples[0].At) || t.After(samples[len(samples)-1].At) {
		return 0, ErrNoCoverage
	}
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		if t.After(b.At) {
			continue
		}
		span := b.At.Sub(a.At)
		if span <= 0 {
			return float64(b.Acks), nil
		}
		f := float64(t.Sub(a.At)) / float64(span)
		return float64(a.Acks) + f*float64(b.Acks-a.Acks), nil
	}
	return float64(samples[0].Acks), nil // t equals the only sample's instant
}

// Window is the acknowledgements counted over a time span.
type Window struct {
	Acks float64
	Span time.Duration
}

// Rate is the window's acknowledgements per second (NaN for an empty span).
func (w Window) Rate() float64 {
	if w.Span <= 0 {
		return math.NaN()
	}
	return w.Acks / w.Span.Seconds()
}

// Add sums two windows (the campaign's totals over several faults).
func (w Window) Add(o Window) Window { return Window{Acks: w.Acks + o.Acks, Span: w.Span + o.Span} }

// window counts the acknowledgements between from and to.
func window(samples []Sample, from, to time.Time) (Window, error) {
	a, err := countAt(samples, from)
	if err != nil {
		return Window{}, fmt.Errorf("%w: %s", err, coverage(samples, from, to))
	}
	b, err := countAt(samples, to)
	if err != nil {
		return Window{}, fmt.Errorf("%w: %s", err, coverage(samples, from, to))
	}
	return Window{Acks: b - a, Span: to.Sub(from)}, nil
}

func coverage(samples []Sample, from, to time.Time) string {
	if len(samples) == 0 {
		return "no samples"
	}
	first, last := samples[0].At, samples[len(samples)-1].At
	return fmt.Sprintf("window %s..%s, samples %s..%s", from.Format("15:04:05.000"), to.Format("15:04:05.000"),
		first.Format("15:04:05.000"), last.Format("15:04:05.000"))
}

// Fault is when a fault began and ended (the node resumed, the rules
// removed, the killed node back in the ring).
type Fault struct {
	Began, Ended time.Time
}

// FaultRates are the acknowledgement windows around one fault.
type FaultRates struct {
	Before Window // the Lead before the fault began
	During Window // the whole fault
	Late   Window // from Settle after the fault began to its end
}

// RatioDuring is the rate over the whole fault divided by the rate before
// (NaN when nothing was acknowledged before).
func (r FaultRates) RatioDuring() float64 { return ratio(r.During, r.Before) }

// RatioLate is the rate from Settle after the fault began divided by the
// rate before.
func (r FaultRates) RatioLate() float64 { return ratio(r.Late, r.Before) }

func ratio(w, before Window) float64 {
	b := before.Rate()
	if !(b > 0) {
		return math.NaN()
	}
	return w.Rate() / b
}

// Add sums two faults' windows.
func (r FaultRates) Add(o FaultRates) FaultRates {
	return FaultRates{Before: r.Before.Add(o.Before), During: r.During.Add(o.During), Late: r.Late.Add(o.Late)}
}

// Measure is how the rates around a fault are taken.
type Measure struct {
	// Lead is the window before the fault (10 s in the campaign).
	Lead time.Duration
	// Settle is how long after the fault began its "late" window starts
	// (2 s in the campaign).
	Settle time.Duration
}

// Rates measures the acknowledgement windows around f from samples (in
// time order), which must cover Lead before f began to f's end. A fault
// shorter than Settle has an empty late window (rate NaN).
func (m Measure) Rates(samples []Sample, f Fault) (FaultRates, error) {
	if m.Lead <= 0 || m.Settle < 0 {
		return FaultRates{}, fmt.Errorf("torture: measure lead %v, settle %v: want lead > 0, settle >= 0", m.Lead, m.Settle)
	}
	if f.Ended.Before(f.Began) {
		return FaultRates{}, fmt.Errorf("torture: fault ends (%s) before it begins (%s)", f.Ended.Format(time.RFC3339Nano), f.Began.Format(time.RFC3339Nano))
	}
	var r FaultRates
	var err error
	if r.Before, err = window(samples, f.Began.Add(-m.Lead), f.Began); err != nil {
		return FaultRates{}, fmt.Errorf("before the fault: %w", err)
	}
	if r.During, err = window(samples, f.Began, f.Ended); err != nil {
		return FaultRates{}, fmt.Errorf("during the fault: %w", err)
	}
	if late := f.Began.Add(m.Settle); late.Before(f.Ended) {
		if r.Late, err = window(samples, late, f.Ended); err != nil {
			return FaultRates{}, fmt.Errorf("late in the fault: %w", err)
		}
	}
	return r, nil
}

// Targets are the least ratios to the rate before a fault (0: no target).
type Targets struct {
	During float64 // over the whole fault
	Late   float64 // from Measure.Settle after the fault began
}

// Met reports whether r meets t; a ratio that cannot be computed (nothing
// acknowledged before the fault, an empty window) does not meet a target.
func (t Targets) Met(r FaultRates) bool {
	ok := func(ratio, target float64) bool { return target <= 0 || ratio >= target }
	return ok(r.RatioDuring(), t.During) && ok(r.RatioLate(), t.Late)
}

// String is "during >= 0.5, from +2 s >= 0.8" style, given the settle.
func (t Targets) String(settle time.Duration) string {
	var parts []string
	if t.During > 0 {
		parts = append(parts, fmt.Sprintf("during >= %.2g", t.During))
	}
	if t.Late > 0 {
		parts = append(parts, fmt.Sprintf("from +%v >= %.2g", settle, t.Late))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
