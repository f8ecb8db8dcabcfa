//go:build linux

package appparttest

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// A roundTrip waits as a network round trip does: the wait ends when the
// kernel reports a file descriptor ready (a timerfd), not when the Go
// runtime's timer is next checked. Go's poller sleeps in whole
// milliseconds (epoll_wait's timeout), so an idle process wakes a runtime
// timer of 5 ms up to 1 ms late; a socket's readiness, as a store's
// answer, wakes it at once.
type roundTrip struct {
	fd   int
	file *os.File // the poller's handle on fd
}

// freeRoundTrips keeps idle timerfds for reuse: one per call in flight at
// most, kept for the life of the process (a test helper's).
var freeRoundTrips = make(chan *roundTrip, 1024)

func getRoundTrip() (*roundTrip, error) {
	select {
	case r := <-freeRoundTrips:
		return r, nil
	default:
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("timerfd_create", err)
	}
	return &roundTrip{fd: fd, file: os.NewFile(uintptr(fd), "timerfd")}, nil
}

func (r *roundTrip) put() {
	select {
	case freeRoundTrips <- r:
	default:
		r.file.Close()
	}
}

// sleepRoundTrip waits d, or until ctx ends.
func sleepRoundTrip(ctx context.Context, d time.Duration) error {
	r, err := getRoundTrip()
	if err != nil {
		return err
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if err := unix.TimerfdSettime(r.fd, 0, &spec, nil); err != nil {
		r.file.Close()
		return os.NewSyscallError("timerfd_settime", err)
	}
	stop := context.AfterFunc(ctx, func() { r.file.SetReadDeadline(time.Unix(1, 0)) })
	var buf [8]byte
	_, err = r.file.Read(buf[:])
	if !stop() || err != nil {
		// ctx ended (or the read failed): the timer may still be armed and
		// the deadline set; this timerfd is not reused.
		r.file.Close()
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		return err
	}
	r.put()
	return nil
}
