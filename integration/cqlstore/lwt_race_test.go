package cqlstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/cql"
)

// TestLWTRaceAcrossSessions: 16 racers, each with its own Store and so its
// own session and connections, race InsertIfNotExists on one key, then 10
// rounds of CompareAndSwap from the current value. Each round has exactly
// one winner and the row holds the winner's value. A racer whose outcome
// the cluster could not report (ErrUnknownOutcome, possible under Paxos
// contention) is allowed, and then the row must hold the value of one
// racer that won or did not know.
func TestLWTRaceAcrossSessions(t *testing.T) {
	const racers, rounds = 16, 10
	stores := make([]*cql.Store, racers)
	for i := range stores {
		stores[i] = open(t, itest.Keyspace())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p, c := []byte(itest.UniqueName("race_")), []byte("k")

	type result struct {
		ok  bool
		err error
	}
	race := func(round int, cur []byte) []byte {
		t.Helper()
		results := make([]result, racers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for r := range racers {
			wg.Go(func() {
				<-start
				v := fmt.Appendf(nil, "round %d racer %d", round, r)
				if cur == nil {
					results[r].ok, results[r].err = stores[r].InsertIfNotExists(ctx, p, c, v, 0)
				} else {
					results[r].ok, results[r].err = stores[r].CompareAndSwap(ctx, p, c, cur, v, 0)
				}
			})
		}
		close(start)
		wg.Wait()

		var winners, unknown []int
		for r, res := range results {
			switch {
			case errors.Is(res.err, storage.ErrUnknownOutcome):
				unknown = append(unknown, r)
			case res.err != nil:
				t.Fatalf("round %d racer %d: %v", round, r, res.err)
			case res.ok:
				winners = append(winners, r)
			}
		}
		got, ok, err := stores[0].Get(ctx, p, c)
		require.NoError(t, err)
		require.True(t, ok)
		if len(unknown) > 0 {
			t.Logf("round %d: %d racers with unknown outcome", round, len(unknown))
		}
		require.LessOrEqual(t, len(winners), 1, "round %d: winners %v", round, winners)
		if len(unknown) == 0 {
			require.Len(t, winners, 1, "round %d: exactly one winner", round)
		}
		owner := -1
		for _, r := range append(winners, unknown...) {
			if string(got) == fmt.Sprintf("round %d racer %d", round, r) {
				owner = r
			}
		}
		require.NotEqual(t, -1, owner, "round %d: the row holds %q, not a winner's value", round, got)
		if len(winners) == 1 {
			assert.Equal(t, winners[0], owner, "round %d", round)
		}
		return got
	}

	cur := race(0, nil)
	for round := 1; round <= rounds; round++ {
		cur = race(round, cur)
	}
}
