// Package leakcheck owns the project's goroutine leak check for tests that
// close network clients: goleak's check, repeated for a bounded time so that
// goroutines which end asynchronously after their owner has closed are not
// reported. gocql is the case in point: after Session.Close, a connection's
// reader (connReader.Read) and write flusher (writeCoalescer.writeFlusherImpl)
// end only once the closed socket's pending read returns, which a busy core
// can delay by seconds. A goroutine still running when the bound has passed
// is reported as a leak, whatever its function.
package leakcheck

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Wait is how long VerifyNone waits for goroutines to end.
const Wait = 10 * time.Second

// VerifyNone reports, through tb.Errorf, the goroutines (other than those
// opts ignore) still running Wait after the call began. It returns as soon
// as none is left.
func VerifyNone(tb testing.TB, opts ...goleak.Option) {
	tb.Helper()
	VerifyNoneWithin(tb, Wait, opts...)
}

// VerifyNoneWithin is VerifyNone with the bound d.
func VerifyNoneWithin(tb testing.TB, d time.Duration, opts ...goleak.Option) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for {
		// Find itself retries for a few hundred milliseconds.
		err := goleak.Find(opts...)
		if err == nil {
			return
		}
		if !time.Now().Before(deadline) {
			tb.Errorf("leakcheck: goroutines still running %v after the check began: %v", d, err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}
