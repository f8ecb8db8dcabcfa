package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestClockIsTheMachinesWithoutFlags(t *testing.T) {
	require.Nil(t, (&clockFlags{}).now(time.Now()))
}

func TestClockOffsetMayBeNegative(t *testing.T) {
	for _, off := range []time.Duration{30 * time.Second, -30 * time.Second} {
		now := (&clockFlags{offset: off}).now(time.Now())
		got := time.Until(now())
		assert.InDelta(t, off.Seconds(), got.Seconds(), 1, "offset %v", off)
	}
}

// The clock steps back once --clock-step-after has passed since start.
func TestClockStepsBackAfterItsDelay(t *testing.T) {
	start := time.Now()
	now := (&clockFlags{offset: 3 * time.Second, stepBack: 10 * time.Second, stepAfter: time.Hour}).now(start)
	assert.InDelta(t, 3, time.Until(now()).Seconds(), 1)
	now = (&clockFlags{offset: 3 * time.Second, stepBack: 10 * time.Second, stepAfter: time.Nanosecond}).now(start.Add(-time.Second))
	assert.InDelta(t, -7, time.Until(now()).Seconds(), 1)
	// Unix time, as the client timestamps are taken, goes back too.
	assert.Less(t, now().UnixMicro(), time.Now().Add(-6*time.Second).UnixMicro())
}

func TestClockFlagsAreHidden(t *testing.T) {
	r := runCLI(t, "bench", "--help")
	require.Equal(t, ExitOK, r.code)
	assert.NotContains(t, r.stdout, "clock-")
	assert.Contains(t, r.stdout, "--cql-lwt-attempt-timeout")
}
