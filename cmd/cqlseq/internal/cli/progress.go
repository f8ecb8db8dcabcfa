package cli

import (
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
)

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progressEnabled reports whether progress bars are drawn: stderr is a
// terminal (or a test says so) and --no-progress is not given.
func (e *env) progressEnabled() bool { return e.tty && !e.noProgress }

// newBar returns a bar of steps steps on stderr, or nil when bars are off.
// A bar with a known max starts no goroutine.
func (e *env) newBar(steps int64, desc string) *progressbar.ProgressBar {
	if !e.progressEnabled() {
		return nil
	}
	return progressbar.NewOptions64(max(steps, 1),
		progressbar.OptionSetWriter(e.stderr),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetSpinnerChangeInterval(0),
	)
}

// newSpinner returns a bar of unknown length on stderr whose description
// the caller updates (Describe), or nil when bars are off. It starts no
// goroutine: it is drawn when described, at most every 100 ms.
func (e *env) newSpinner(desc string) *progressbar.ProgressBar {
	if !e.progressEnabled() {
		return nil
	}
	return progressbar.NewOptions64(-1,
		progressbar.OptionSetWriter(e.stderr),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetSpinnerChangeInterval(0),
	)
}

// timedProgress draws a bar that fills over d and names the count of
// completed commands, until the returned stop is called; stop clears the
// bar and waits for the goroutine that draws it. Without bars it starts
// nothing.
func (e *env) timedProgress(desc string, d time.Duration, count *atomic.Uint64) (stop func()) {
	bar := e.newBar(d.Milliseconds(), desc)
	if bar == nil {
		return func() {}
	}
	began := time.Now()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				bar.Describe(desc + " " + commas(count.Load()) + " commands")
				_ = bar.Set64(min(time.Since(began).Milliseconds(), bar.GetMax64()))
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			_ = bar.Finish()
		})
	}
}
