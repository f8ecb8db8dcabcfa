package idservice_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/storage/mem"
	"github.com/cqlseq/cqlseq/timeshard"
)

// drawConcurrently has clients goroutines take IDs over HTTP from the
// servers (client i from servers[i%len]) with random counts, and returns
// every ID taken per path.
func drawConcurrently(t *testing.T, servers []*server, paths []string, clients, requests int) map[string][]int64 {
	t.Helper()
	var mu sync.Mutex
	got := map[string][]int64{}
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := servers[c%len(servers)]
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			for i := range requests {
				p := paths[(c+i)%len(paths)]
				n := 1 + rng.IntN(40)
				r, err := s.try("POST", fmt.Sprintf("%s?count=%d", p, n), nil, "")
				if err == nil && r.status != 200 {
					err = fmt.Errorf("%s: %d %s", p, r.status, r.body)
				}
				if err != nil {
					errs <- err
					return
				}
				ids, err := parseIDs(r.body)
				if err == nil && len(ids) != n {
					err = fmt.Errorf("%s?count=%d: %d IDs", p, n, len(ids))
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				got[p] = append(got[p], ids...)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	return got
}

func parseIDs(body string) ([]int64, error) {
	var b struct {
		IDs []int64 `json:"ids"`
	}
	if err := jsonUnmarshal(body, &b); err != nil {
		return nil, err
	}
	return b.IDs, nil
}

// duplicates returns the IDs of ids seen more than once.
func duplicates(ids []int64) []int64 {
	seen := make(map[int64]bool, len(ids))
	var dups []int64
	for _, id := range ids {
		if seen[id] {
			dups = append(dups, id)
		}
		seen[id] = true
	}
	return dups
}

var uniquePaths = []string{"/v1/sequences/u/next", "/v1/timeshard/63/next", "/v1/timeshard/53/next"}

// checkUnique draws from servers and checks no ID is handed out twice,
// per path.
func checkUnique(t *testing.T, servers []*server) {
	got := drawConcurrently(t, servers, uniquePaths, 16, 40)
	for _, p := range uniquePaths {
		ids := got[p]
		require.NotEmpty(t, ids, p)
		assert.Empty(t, duplicates(ids), "%s: %d IDs, handed out twice: %v", p, len(ids), duplicates(ids))
	}
	t.Logf("%d galloc IDs, %d + %d timeshard IDs", len(got[uniquePaths[0]]), len(got[uniquePaths[1]]), len(got[uniquePaths[2]]))
}

// TestUniqueOneServer: many concurrent clients of one server get no ID
// twice (a galloc sequence with small chunks, so that the clients cross
// many chunk switches, and both timeshard layouts).
func TestUniqueOneServer(t *testing.T) {
	s := start(t, testOptions(nil), nil)
	s.create(t, `{"name":"u","chunk_size":37}`)
	checkUnique(t, []*server{s})
}

// TestUniqueTwoServers: two servers on one store (each with its own
// galloc process and its own node leases) get no ID twice between them.
func TestUniqueTwoServers(t *testing.T) {
	st := mem.New(mem.Options{})
	o := testOptions(st)
	o.Timeshard = timeshard.Options{FirstNode: 0}
	a, b := start(t, o, nil), start(t, o, nil)
	a.create(t, `{"name":"u","chunk_size":37}`)
	for _, l := range []string{"63", "53"} {
		na, _ := a.svc.Node(l)
		nb, _ := b.svc.Node(l)
		require.NotEqual(t, na, nb, "layout %s: each instance leases its own node", l)
	}
	checkUnique(t, []*server{a, b})
}
