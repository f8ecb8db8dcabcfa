package leakcheck

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recordingTB captures Errorf instead of failing the real test.
type recordingTB struct {
	testing.TB
	errs []string
}

func (r *recordingTB) Helper() {}

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func TestWaitsForAGoroutineThatEndsLate(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(time.Second) // longer than goleak.Find's own retries
	}()
	rec := &recordingTB{TB: t}
	began := time.Now()
	VerifyNoneWithin(rec, 20*time.Second, ignore)
	require.Empty(t, rec.errs)
	require.Less(t, time.Since(began), 15*time.Second, "returns once the goroutine has ended")
	<-done
}

func TestReportsAGoroutineThatOutlivesTheBound(t *testing.T) {
	ignore := goleak.IgnoreCurrent()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		<-stop
	}()
	rec := &recordingTB{TB: t}
	VerifyNoneWithin(rec, 300*time.Millisecond, ignore)
	close(stop)
	<-done
	require.Len(t, rec.errs, 1)
	require.Contains(t, rec.errs[0], "TestReportsAGoroutineThatOutlivesTheBound")
}
