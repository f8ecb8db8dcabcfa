package elections

import "time"

// SystemClock returns the Clock of package time.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

type systemTimer struct{ t *time.Timer }

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

func (systemClock) AfterFunc(d time.Duration, f func()) Timer {
	return systemTimer{time.AfterFunc(d, f)}
}

func (t systemTimer) C() <-chan time.Time { return t.t.C }

func (t systemTimer) Stop() bool { return t.t.Stop() }
