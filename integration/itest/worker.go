package itest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/isequencer"
)

// Call is one Do of a Worker: when it began and ended, and its error.
type Call struct {
	Began, Ended time.Time
	Err          error
}

// Worker runs commands on one partition in a loop until stopped
// (appparttest.Cmd over 7 workspaces, each payload naming the worker and
// the command), and records every call and every acknowledged command.
type Worker struct {
	name   string
	p      *apppart.Partition
	part   isequencer.PartitionID
	cancel context.CancelFunc
	done   chan struct{}
	mu     struct {
		sync.Mutex
		seq   int
		calls []Call
		acked []appparttest.Acked
		ackAt []time.Time
	}
}

// workerPause is a Worker's pace after a failed call: it keeps the loop
// from spinning while the partition is busy or the storage down.
const workerPause = 20 * time.Millisecond

// RunWorker starts a Worker on partition part's p; Stop ends it.
func RunWorker(name string, p *apppart.Partition, part isequencer.PartitionID) *Worker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &Worker{name: name, p: p, part: part, cancel: cancel, done: make(chan struct{})}
	go w.run(ctx)
	return w
}

func (w *Worker) run(ctx context.Context) {
	defer close(w.done)
	for ctx.Err() == nil {
		w.mu.Lock()
		w.mu.seq++
		i := w.mu.seq
		w.mu.Unlock()
		cmd := appparttest.Cmd(appparttest.WS(w.part, 1+i%7))
		payload := fmt.Sprintf("%s-%d", w.name, i)
		cmd.Payload = []byte(payload)
		began := time.Now()
		r, err := w.p.Do(ctx, cmd)
		c := Call{Began: began, Ended: time.Now(), Err: err}
		w.mu.Lock()
		w.mu.calls = append(w.mu.calls, c)
		if err == nil {
			w.mu.acked = append(w.mu.acked, appparttest.Acked{Owner: w.name, Cmd: cmd, Result: r, Payload: payload})
			w.mu.ackAt = append(w.mu.ackAt, c.Ended)
		}
		w.mu.Unlock()
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(workerPause):
			}
		}
	}
}

// Stop cancels the loop and waits for it.
func (w *Worker) Stop() {
	w.cancel()
	<-w.done
}

// Acked returns how many commands w has acknowledged.
func (w *Worker) Acked() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.mu.acked)
}

// AckedBefore returns how many of w's commands were acknowledged before t.
func (w *Worker) AckedBefore(t time.Time) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, at := range w.mu.ackAt {
		if at.Before(t) {
			n++
		}
	}
	return n
}

// FirstAckAfter returns when w's first command acknowledged after since
// ended (zero: none).
func (w *Worker) FirstAckAfter(since time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, at := range w.mu.ackAt {
		if at.After(since) {
			return at
		}
	}
	return time.Time{}
}

// Snapshot returns copies of the calls and acknowledgements so far.
func (w *Worker) Snapshot() ([]Call, []appparttest.Acked) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Call(nil), w.mu.calls...), append([]appparttest.Acked(nil), w.mu.acked...)
}

// WaitAcks fails the test unless w acknowledges n more commands within
// limit, checking every 20 ms; the failure names the classes of w's calls
// since the wait began and the last error, so that a stuck partition says
// why.
func (w *Worker) WaitAcks(t testing.TB, n int, limit time.Duration, what string) {
	t.Helper()
	since := time.Now()
	want := w.Acked() + n
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(limit)
	for w.Acked() < want {
		select {
		case <-tick.C:
		case <-timeout:
			calls, _ := w.Snapshot()
			var recent []Call
			var last error
			for _, c := range calls {
				if c.Began.After(since) {
					recent = append(recent, c)
					if c.Err != nil {
						last = c.Err
					}
				}
			}
			t.Fatalf("no %s within %v: calls %v, last error: %v", what, limit, ErrorClasses(recent), last)
		}
	}
}

// ErrorClasses counts calls by the apppart error they wrap.
func ErrorClasses(calls []Call) map[string]int {
	m := map[string]int{}
	for _, c := range calls {
		switch {
		case c.Err == nil:
			m["ok"]++
		case errors.Is(c.Err, context.Canceled):
			m["cancelled"]++
		case errors.Is(c.Err, apppart.ErrNotLeader):
			m["not-leader"]++
		case errors.Is(c.Err, apppart.ErrBusy):
			m["busy"]++
		case errors.Is(c.Err, apppart.ErrStopped):
			m["stopped"]++
		case errors.Is(c.Err, apppart.ErrWrite):
			m["write"]++
		default:
			m["other"]++
		}
	}
	return m
}
