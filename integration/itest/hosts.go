package itest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/cqlseq/cqlseq/elections"
	"github.com/cqlseq/cqlseq/orchestration"
	"github.com/cqlseq/cqlseq/storage"
)

// WaitLimit bounds every real-time wait of the orchestration tests.
const WaitLimit = 30 * time.Second

// HostPartitions is the number of partitions of a HostConfig host.
const HostPartitions = 4

// Recv returns the next value of ch, failing the test after WaitLimit.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(WaitLimit):
		t.Fatalf("no %s within %v", what, WaitLimit)
	}
	panic("unreachable")
}

// HostConfig is a one-slot host owning partitions 0..HostPartitions-1 on
// st, with a 6 s lease and 3 s skew (Cassandra's whole-second TTLs need
// 1 s of it; the rest is room for a busy 2-core machine), running svc; events receive its leadership
// events (dropped when full). ip only identifies the host in its lease.
func HostConfig(st storage.Storage, ip byte, svc orchestration.Service, events chan<- elections.Event) orchestration.Config {
	return orchestration.Config{
		Storage:            st,
		NumVVM:             1,
		NumPartitions:      HostPartitions,
		IP:                 net.IPv4(10, 0, 0, ip),
		LeadershipDuration: 6 * time.Second,
		Skew:               3 * time.Second,
		AcquisitionTimeout: WaitLimit,
		AcquisitionRetry:   200 * time.Millisecond,
		Services:           []orchestration.Service{svc},
		KillThreshold:      -1,
		Logger:             slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnEvent: func(ev elections.Event) {
			select {
			case events <- ev:
			default:
			}
		},
	}
}

// Launch makes a host of c and launches it in the background; the channel
// receives the problem context Launch returns.
func Launch(t testing.TB, c orchestration.Config) (*orchestration.Host, <-chan context.Context) {
	t.Helper()
	h, err := orchestration.New(c)
	if err != nil {
		t.Fatalf("orchestration.New: %v", err)
	}
	problems := make(chan context.Context, 1)
	go func() { problems <- h.Launch() }()
	return h, problems
}
