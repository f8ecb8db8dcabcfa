package procstat

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCPUAgreesWithGetrusage: after this process spins until getrusage
// says it used 300 ms more CPU (however busy the machine), /proc says
// so too, within its 10 ms steps and the two counters' accounting.
func TestCPUAgreesWithGetrusage(t *testing.T) {
	rusage := func() time.Duration {
		var ru syscall.Rusage
		require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	before, err := Self()
	require.NoError(t, err)
	byPID, err := CPU(os.Getpid())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, byPID, before)
	start, deadline := rusage(), time.Now().Add(time.Minute)
	for rusage()-start < 300*time.Millisecond {
		require.True(t, time.Now().Before(deadline), "300 ms of CPU in a minute")
	}
	after, err := Self()
	require.NoError(t, err)
	assert.InDelta(t, 300*time.Millisecond, after-before, float64(100*time.Millisecond))
	sum, err := Sum([]int{os.Getpid(), os.Getpid()})
	require.NoError(t, err)
	assert.GreaterOrEqual(t, sum, 2*after)
}

func TestCPUOfNoProcess(t *testing.T) {
	_, err := CPU(1 << 30)
	assert.ErrorContains(t, err, "procstat: ")
	_, err = Sum([]int{os.Getpid(), 1 << 30})
	assert.ErrorContains(t, err, "1073741824")
}

// TestParseCommandNameWithSpacesAndParentheses: utime 250 and stime 50
// ticks are 3 s whatever the command name holds.
func TestParseCommandNameWithSpacesAndParentheses(t *testing.T) {
	stat := "4242 (java (x) 2) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 40 0 123 456 789\n"
	d, err := parse("4242", stat)
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, d)
	_, err = parse("4242", "4242 (java) S 1 2")
	assert.ErrorContains(t, err, "fields")
	_, err = parse("4242", "4242 java S")
	assert.ErrorContains(t, err, "no command name")
}
