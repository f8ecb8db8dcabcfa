package ksuuid_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/ksuuid"
)

func TestNewIsIncreasingAndParses(t *testing.T) {
	const workers, per = 4, 5000
	out := make([][]ksuuid.ID, workers)
	var wg sync.WaitGroup
	before := time.Now().Truncate(time.Millisecond)
	for w := range out {
		wg.Go(func() {
			for range per {
				id, err := ksuuid.New()
				if err != nil {
					t.Error(err)
					return
				}
				out[w] = append(out[w], id)
			}
		})
	}
	wg.Wait()
	after := time.Now()
	var all []string
	for _, ids := range out {
		for i, id := range ids {
			if i > 0 {
				require.Equal(t, 1, ksuuid.Compare(id, ids[i-1]), "each goroutine's IDs increase")
			}
			s := ksuuid.Format(id)
			back, err := ksuuid.Parse(s)
			require.NoError(t, err)
			require.Equal(t, id, back)
			tm := ksuuid.Time(id)
			require.False(t, tm.Before(before), "%v before %v", tm, before)
			require.False(t, tm.After(after.Add(time.Second)))
			all = append(all, s)
		}
	}
	slices.Sort(all)
	assert.Len(t, slices.Compact(all), workers*per, "unique")
}

func TestStringOrderIsIDOrder(t *testing.T) {
	a, err := ksuuid.New()
	require.NoError(t, err)
	b, err := ksuuid.New()
	require.NoError(t, err)
	assert.Equal(t, -1, ksuuid.Compare(a, b))
	assert.Less(t, ksuuid.Format(a), ksuuid.Format(b))
	assert.Equal(t, 0, ksuuid.Compare(a, a))
}

func TestAtAndMin(t *testing.T) {
	at := time.Date(2031, 7, 8, 9, 10, 11, 123_000_000, time.UTC)
	id, err := ksuuid.At(at)
	require.NoError(t, err)
	assert.Equal(t, at, ksuuid.Time(id))
	assert.Equal(t, uuid.Version(7), id.Version())
	assert.Equal(t, uuid.RFC4122, id.Variant())
	assert.Equal(t, at, time.Unix(id.Time().UnixTime()).UTC(), "google/uuid reads the same time")
	lo, err := ksuuid.Min(at)
	require.NoError(t, err)
	assert.Equal(t, "01c3fc9a-25b3-7000-8000-000000000000", ksuuid.Format(lo), "layout pinned")
	assert.LessOrEqual(t, ksuuid.Compare(lo, id), 0)
	next, err := ksuuid.Min(at.Add(time.Millisecond))
	require.NoError(t, err)
	assert.Equal(t, -1, ksuuid.Compare(id, next))
	_, err = ksuuid.At(time.Unix(-1, 0))
	assert.Error(t, err)
}

func TestParseRejects(t *testing.T) {
	_, err := ksuuid.Parse("not-a-uuid")
	assert.Error(t, err)
	_, err = ksuuid.Parse(uuid.NewString()) // version 4
	assert.ErrorIs(t, err, ksuuid.ErrNotV7)
}
