package appparttest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
)

// HandOver is what PlannedHandOver measured.
type HandOver struct {
	// TakeOver is the new owner's apppart.Open and WaitReady.
	TakeOver time.Duration
	// Gap is the time between the old owner's last acknowledged command
	// and the new owner's first: what the clients saw as unavailability.
	Gap time.Duration
	// AckedOld, AckedNew: acknowledged commands of each owner.
	AckedOld, AckedNew int
	// Unknown are the old owner's commands of unknown outcome, Settled
	// how many of them the new owner settled as stored.
	Unknown, Settled int
}

func (h HandOver) String() string {
	return fmt.Sprintf("take-over %v, gap %v, acknowledged %d (old owner) + %d (new), unknown %d (settled stored %d)",
		h.TakeOver.Round(time.Millisecond), h.Gap.Round(time.Millisecond), h.AckedOld, h.AckedNew, h.Unknown, h.Settled)
}

// PlannedHandOver moves fenced partition part from one process's owner to
// another's (each on its own store from newStore) while clients run
// commands, the procedure of docs/operations.md: the new owner opens the
// partition (a new epoch, the PLog fenced) and waits until it is ready;
// each client, refused by the old owner, moves to the new one; the old
// owner is closed. The new owner settles the old owner's commands of
// unknown outcome (Partition.Settle), and every acknowledged or settled
// command's event must be in the PLog (VerifyPLog): nothing is lost.
func PlannedHandOver(t *testing.T, newStore func(t testing.TB) storage.Storage, part isequencer.PartitionID, clients int) HandOver {
	stOld, stNew := newStore(t), newStore(t)
	old := Open(t, Options(stOld, part, plog.ModeFenced))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, old.WaitReady(ctx))

	var (
		mu       sync.Mutex
		acked    []Acked
		unknown  []Acked
		lastOld  time.Time
		firstNew time.Time
		h        HandOver
	)
	var next atomic.Pointer[apppart.Partition] // the new owner, once ready
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			p, mine := old, "old"
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				cmd := Cmd(WS(part, 1+c))
				cmd.Payload = fmt.Appendf(nil, "client%d-%s-%d", c, mine, i)
				res, err := p.Do(ctx, cmd)
				now := time.Now()
				a := Acked{Owner: mine, Cmd: cmd, Result: res, Payload: string(cmd.Payload)}
				switch {
				case err == nil:
					mu.Lock()
					acked = append(acked, a)
					if mine == "old" {
						h.AckedOld++
						if now.After(lastOld) {
							lastOld = now
						}
					} else {
						h.AckedNew++
						if firstNew.IsZero() || now.Before(firstNew) {
							firstNew = now
						}
					}
					mu.Unlock()
				case errors.Is(err, apppart.ErrBusy):
					time.Sleep(time.Millisecond)
				case mine == "old":
					if apppart.OutcomeOf(err) == apppart.Unknown {
						mu.Lock()
						unknown = append(unknown, a)
						mu.Unlock()
					}
					// Refused by the deposed owner: move to the new one.
					for next.Load() == nil {
						select {
						case <-stop:
							return
						case <-time.After(time.Millisecond):
						}
					}
					p, mine = next.Load(), "new"
				default:
					t.Errorf("client %d: the new owner refused a command: %v", c, err)
					return
				}
			}
		})
	}
	// The old owner serves: each client's commands are acknowledged.
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return h.AckedOld >= 10*clients }, time.Minute, time.Millisecond)
	began := time.Now()
	nw := Open(t, Options(stNew, part, plog.ModeFenced))
	require.NoError(t, nw.WaitReady(ctx))
	h.TakeOver = time.Since(began)
	next.Store(nw)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return h.AckedNew >= 10*clients }, time.Minute, time.Millisecond)
	close(stop)
	wg.Wait()
	require.NoError(t, old.Close())

	h.Unknown = len(unknown)
	for _, a := range unknown {
		got, err := nw.Settle(ctx, a.Cmd, a.Result)
		require.NoError(t, err, "settling the old owner's offset %d", a.Result.Offset)
		if got == apppart.Stored {
			acked = append(acked, a)
			h.Settled++
		}
	}
	require.NoError(t, nw.Close())
	h.Gap = firstNew.Sub(lastOld)
	VerifyPLog(t, stOld, part, acked)
	return h
}
