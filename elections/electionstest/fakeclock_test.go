package electionstest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFakeClock(t *testing.T) {
	start := time.Unix(100, 0)
	c := NewFakeClock(start)
	var fired []string
	t3 := c.NewTimer(3 * time.Second)
	c.AfterFunc(2*time.Second, func() { fired = append(fired, "f2@"+c.Now().Sub(start).String()) })
	stopped := c.AfterFunc(time.Second, func() { fired = append(fired, "stopped") })
	t5 := c.NewTimer(5 * time.Second)
	now := c.NewTimer(0)
	require.Len(t, now.C(), 1, "d <= 0 fires at once")
	assert.True(t, stopped.Stop())
	assert.False(t, stopped.Stop(), "a stopped timer reports false")
	c.WaitForTimers(2)

	c.Advance(3 * time.Second)
	assert.Equal(t, []string{"f2@2s"}, fired, "AfterFunc runs at its time, in order")
	require.Len(t, t3.C(), 1)
	assert.Equal(t, start.Add(3*time.Second), <-t3.C())
	assert.Empty(t, t5.C())
	assert.False(t, t3.Stop(), "a fired timer reports false")
	assert.Equal(t, start.Add(3*time.Second), c.Now())

	assert.True(t, t5.Stop())
	c.Advance(time.Hour)
	assert.Empty(t, t5.C(), "a stopped timer never fires")
	assert.Equal(t, start.Add(time.Hour+3*time.Second), c.Now())
}
