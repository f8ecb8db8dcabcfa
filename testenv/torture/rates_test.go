package torture

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/plog/plogcheck/plogchecktest"
	"github.com/cqlseq/cqlseq/testenv/leakcheck"
)

var t0 = time.Date(2026, 11, 23, 21, 0, 0, 0, time.UTC)

// steady returns samples every step from `from` to `to` (seconds after
// t0) of a log acknowledging rate(t) per second, starting from acks.
func steady(samples []Sample, from, to float64, step time.Duration, rate func(s float64) float64) []Sample {
	acks := 0.0
	if len(samples) > 0 {
		acks = float64(samples[len(samples)-1].Acks)
	}
	st := step.Seconds()
	for s := from; s <= to+1e-9; s += st {
		if len(samples) > 0 || s > from {
			acks += rate(s) * st
		}
		samples = append(samples, Sample{At: t0.Add(time.Duration(s * float64(time.Second))), Acks: int(math.Round(acks))})
	}
	return samples
}

func at(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }

func TestRatesAroundAPause(t *testing.T) {
	// 100/s for 20 s, a fault from 20 s to 35 s acknowledging nothing for
	// its first 2 s and 90/s after, then 100/s again.
	rate := func(s float64) float64 {
		switch {
		case s > 20 && s <= 22:
			return 0
		case s > 22 && s <= 35:
			return 90
		}
		return 100
	}
	samples := steady(nil, 0, 40, 250*time.Millisecond, rate)
	m := Measure{Lead: 10 * time.Second, Settle: 2 * time.Second}
	r, err := m.Rates(samples, Fault{Began: at(20), Ended: at(35)})
	require.NoError(t, err)
	assert.InDelta(t, 100, r.Before.Rate(), 0.5)
	assert.Equal(t, 10*time.Second, r.Before.Span)
	assert.InDelta(t, 90*13/15.0, r.During.Rate(), 0.5)
	assert.Equal(t, 15*time.Second, r.During.Span)
	assert.InDelta(t, 90, r.Late.Rate(), 0.5)
	assert.InDelta(t, 0.78, r.RatioDuring(), 0.01)
	assert.InDelta(t, 0.90, r.RatioLate(), 0.01)

	assert.True(t, Targets{During: 0.5, Late: 0.8}.Met(r))
	assert.False(t, Targets{During: 0.8, Late: 0.8}.Met(r), "0.78 over the whole fault")
	assert.False(t, Targets{During: 0.5, Late: 0.95}.Met(r), "0.90 from +2 s")
	assert.True(t, Targets{}.Met(r))
}

func TestRatesOfAStall(t *testing.T) {
	// The issue 22 shape: acks stop for the whole fault.
	samples := steady(nil, 0, 30, 250*time.Millisecond, func(s float64) float64 {
		if s > 10 && s <= 25 {
			return 0
		}
		return 140
	})
	r, err := Measure{Lead: 10 * time.Second, Settle: 2 * time.Second}.Rates(samples, Fault{Began: at(10), Ended: at(25)})
	require.NoError(t, err)
	assert.InDelta(t, 140, r.Before.Rate(), 0.5)
	assert.Zero(t, r.During.Acks)
	assert.Zero(t, r.RatioDuring())
	assert.Zero(t, r.RatioLate())
	assert.False(t, Targets{During: 0.2}.Met(r))
}

func TestRatesInterpolateBetweenSamples(t *testing.T) {
	samples := []Sample{{At: at(0), Acks: 0}, {At: at(1), Acks: 100}, {At: at(2), Acks: 100}, {At: at(3), Acks: 400}}
	w, err := window(samples, at(0.5), at(2.5))
	require.NoError(t, err)
	assert.InDelta(t, 50+150, w.Acks, 1e-9) // 50 at 0.5 s, 250 at 2.5 s
	assert.InDelta(t, 100, w.Rate(), 1e-9)

	_, err = window(samples, at(-0.1), at(1))
	require.ErrorIs(t, err, ErrNoCoverage)
	_, err = window(samples, at(1), at(3.1))
	require.ErrorIs(t, err, ErrNoCoverage)
	_, err = window(nil, at(0), at(1))
	require.ErrorIs(t, err, ErrNoCoverage)
}

func TestRatesNeedTheLeadCovered(t *testing.T) {
	samples := steady(nil, 5, 30, 250*time.Millisecond, func(float64) float64 { return 50 })
	m := Measure{Lead: 10 * time.Second, Settle: 2 * time.Second}
	_, err := m.Rates(samples, Fault{Began: at(12), Ended: at(20)})
	require.ErrorIs(t, err, ErrNoCoverage, "sampling began 7 s before the fault")
	_, err = m.Rates(samples, Fault{Began: at(20), Ended: at(31)})
	require.ErrorIs(t, err, ErrNoCoverage, "sampling ended before the fault did")
	_, err = m.Rates(samples, Fault{Began: at(20), Ended: at(19)})
	require.Error(t, err)
	_, err = Measure{}.Rates(samples, Fault{Began: at(20), Ended: at(25)})
	require.Error(t, err)
}

func TestRatioOfNothingBeforeIsNaNAndMissesTargets(t *testing.T) {
	samples := steady(nil, 0, 20, time.Second, func(s float64) float64 {
		if s > 10 {
			return 10
		}
		return 0
	})
	r, err := Measure{Lead: 10 * time.Second, Settle: 2 * time.Second}.Rates(samples, Fault{Began: at(10), Ended: at(15)})
	require.NoError(t, err)
	assert.True(t, math.IsNaN(r.RatioDuring()))
	assert.False(t, Targets{During: 0.5}.Met(r))
}

func TestShortFaultHasNoLateWindow(t *testing.T) {
	samples := steady(nil, 0, 20, 250*time.Millisecond, func(float64) float64 { return 10 })
	r, err := Measure{Lead: 10 * time.Second, Settle: 2 * time.Second}.Rates(samples, Fault{Began: at(10), Ended: at(11)})
	require.NoError(t, err)
	assert.True(t, math.IsNaN(r.RatioLate()))
	assert.InDelta(t, 1, r.RatioDuring(), 0.01)
	assert.False(t, Targets{Late: 0.8}.Met(r), "no late window: the target cannot be met")
	assert.True(t, Targets{During: 0.8}.Met(r))
}

func TestFaultRatesAddWeighsBySpan(t *testing.T) {
	a := FaultRates{Before: Window{Acks: 1000, Span: 10 * time.Second}, During: Window{Acks: 0, Span: 10 * time.Second}}
	b := FaultRates{Before: Window{Acks: 1000, Span: 10 * time.Second}, During: Window{Acks: 3000, Span: 30 * time.Second}}
	s := a.Add(b)
	assert.InDelta(t, 100, s.Before.Rate(), 1e-9)
	assert.InDelta(t, 75, s.During.Rate(), 1e-9)
	assert.InDelta(t, 0.75, s.RatioDuring(), 1e-9)
}

func TestTargetsString(t *testing.T) {
	assert.Equal(t, "during >= 0.5, from +2s >= 0.8", Targets{During: 0.5, Late: 0.8}.String(2*time.Second))
	assert.Equal(t, "during >= 0.2", Targets{During: 0.2}.String(2*time.Second))
	assert.Equal(t, "none", Targets{}.String(2*time.Second))
}

func TestSamplerSamplesAGrowingLogAndStops(t *testing.T) {
	defer leakcheck.VerifyNone(t)
	p := filepath.Join(t.TempDir(), "acks.log")
	s, err := StartSampler(context.Background(), p, 5*time.Millisecond)
	require.NoError(t, err)
	for range 20 {
		plogchecktest.AppendAckLog(t, p, "0 1 1 1:1\n")
		time.Sleep(2 * time.Millisecond)
	}
	s.Stop()
	s.Stop()
	samples, err := s.Samples()
	require.NoError(t, err)
	require.Greater(t, len(samples), 2)
	require.Zero(t, samples[0].Acks)
	require.Equal(t, 20, samples[len(samples)-1].Acks)
	require.Equal(t, samples[len(samples)-1], s.Last())
	for i := 1; i < len(samples); i++ {
		require.False(t, samples[i].At.Before(samples[i-1].At))
		require.GreaterOrEqual(t, samples[i].Acks, samples[i-1].Acks)
	}
	_, err = StartSampler(context.Background(), p, 0)
	require.Error(t, err)
}
