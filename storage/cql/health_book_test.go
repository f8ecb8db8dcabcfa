package cql

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestLatencyWindowP99(t *testing.T) {
	var w latencyWindow
	now := time.Unix(0, 0)
	for i := 1; i <= 1000; i++ {
		w.add(now, time.Duration(i)*time.Millisecond)
	}
	// The window holds the last 512 samples, 489..1000 ms.
	assert.Equal(t, 995*time.Millisecond, w.p99(now))
}

// The state machines alone: events in, verdict out, no gocql session, no
// lock, no logger.

var testLimits = healthLimits{floor: 100 * time.Millisecond, factor: 10, attemptTO: time.Second, callTO: 5 * time.Second}

func TestHostHealthVerdicts(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	ms := time.Millisecond
	tests := []struct {
		name    string
		events  func(m *hostHealth)
		now     time.Duration
		wstate  suspicion
		wsilent time.Duration
	}{
		{"no events", func(*hostHealth) {}, time.Second, notSuspected, 0},
		{"outstanding under the threshold", func(m *hostHealth) { m.handOut(at(0), testLimits) }, 90 * ms, notSuspected, 90 * ms},
		{"outstanding past the threshold", func(m *hostHealth) { m.handOut(at(0), testLimits) }, 110 * ms, suspectSilent, 110 * ms},
		{"a reply clears it", func(m *hostHealth) { m.handOut(at(0), testLimits); m.replied(at(50*ms), true, false) }, time.Second, notSuspected, 0},
		{"a refusal suspects it", func(m *hostHealth) { m.handOut(at(0), testLimits); m.replied(at(5*ms), false, true) }, time.Minute, suspectRefused, 0},
		{"another server error leaves a refusal", func(m *hostHealth) {
			m.replied(at(5*ms), false, true)
			m.replied(at(10*ms), false, false)
		}, time.Minute, suspectRefused, 0},
		{"a result clears a refusal", func(m *hostHealth) {
			m.replied(at(5*ms), false, true)
			m.replied(at(10*ms), true, false)
		}, time.Minute, notSuspected, 0},
		{"a hand-out expires after callTO", func(m *hostHealth) { m.handOut(at(0), testLimits) }, 6 * time.Second, notSuspected, 0},
		{"an unanswered end keeps the silence past callTO", func(m *hostHealth) {
			m.handOut(at(0), testLimits)
			m.unanswered(at(0), at(3*time.Second))
		}, 6 * time.Second, suspectSilent, 3 * time.Second},
		{"a timeout verdict outlasts callTO", func(m *hostHealth) {
			m.handOut(at(0), testLimits)
			m.unanswered(at(0), at(time.Second))
			m.timedOutAt, m.timedOutAlone = at(time.Second), true
		}, time.Minute, suspectLoneTimeout, time.Second},
		{"withdrawn", func(m *hostHealth) {
			m.timedOutAt, m.timedOutAlone = at(time.Second), true
			m.withdraw()
		}, 2 * time.Second, notSuspected, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m hostHealth
			tt.events(&m)
			state, silent := m.verdict(at(tt.now), testLimits, 100*ms)
			assert.Equal(t, tt.wstate, state, state.String())
			assert.Equal(t, tt.wsilent, silent)
		})
	}
}

func TestHealthBookTimeoutRules(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	state := func(b *healthBook, k string, now time.Time) suspicion {
		s, _, _ := b.verdict(k, now)
		return s
	}

	// Another host replied in the window: the silence is A's.
	b := newHealthBook(testLimits)
	b.replied("b", at(400*time.Millisecond), at(500*time.Millisecond), true, false)
	b.timedOut("a", at(0), at(time.Second))
	assert.Equal(t, suspectTimeout, state(&b, "a", at(time.Second)))

	// Nothing to compare with: a lone timeout.
	b = newHealthBook(testLimits)
	assert.Empty(t, b.timedOut("a", at(0), at(time.Second)))
	assert.Equal(t, suspectLoneTimeout, state(&b, "a", at(time.Second)))

	// Several hosts time out together, nobody replies: a shared silence
	// withdraws the lone timeout and suspects nobody.
	assert.Equal(t, []string{"a"}, b.timedOut("b", at(0), at(time.Second)))
	assert.Empty(t, b.timedOut("c", at(0), at(time.Second)))
	for _, k := range []string{"a", "b", "c"} {
		assert.Equal(t, notSuspected, state(&b, k, at(time.Second)), k)
	}

	// A timeout that follows a lone one by more than the floor is explained
	// by it: the earlier host stays suspected, the later one is not.
	b = newHealthBook(testLimits)
	b.timedOut("a", at(0), at(time.Second))
	assert.Empty(t, b.timedOut("b", at(800*time.Millisecond), at(1150*time.Millisecond)))
	assert.Equal(t, suspectLoneTimeout, state(&b, "a", at(1150*time.Millisecond)))
	assert.Equal(t, notSuspected, state(&b, "b", at(1150*time.Millisecond)))
	// Within the floor it is the same silence.
	b = newHealthBook(testLimits)
	b.timedOut("a", at(0), at(time.Second))
	assert.Equal(t, []string{"a"}, b.timedOut("b", at(800*time.Millisecond), at(1050*time.Millisecond)))

	// A reply re-admits a suspected host.
	b = newHealthBook(testLimits)
	b.timedOut("a", at(0), at(time.Second))
	b.replied("a", at(2*time.Second), at(2*time.Second), false, false)
	assert.Equal(t, notSuspected, state(&b, "a", at(2*time.Second)))
}
