package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// The service phase's admin load (issue 52: sequences altered and retired
// under load): while vegeta draws IDs, one goroutine alters the chunk
// sizes of svc_a (50 to 200) and svc_b (and turns svc_b's adaptive step on
// and off) through a random instance every svcAlterEvery, and the phase
// retires svc_r midway. checkService then holds the sequences to their
// largest chunks (svcMaxChunk) and svc_r to its retirement: 410 (Leaf:
// 500 sequence_retired) once it was sent, no 2xx later than
// svcRetireGrace after its acknowledgement, and no ID twice throughout.

const (
	svcAdaptiveSeq = "svc_c" // created adaptive
	svcRetiredSeq  = "svc_r" // retired midway
	svcAlterEvery  = 700 * time.Millisecond
	svcAlterMin    = 50
	svcAlterMax    = 200
	// svcRetireGrace: an instance that did not serve the retirement sees
	// it within its --probe-interval (1 s), a request takes at most
	// svcRequestTimeout.
	svcRetireGrace = 1*time.Second + svcRequestTimeout + time.Second
	// svcMaxAdaptive is galloc.MaxAdaptiveChunkSize.
	svcMaxAdaptive = 1_000_000
)

// svcMaxChunk is each sequence's largest possible chunk.
var svcMaxChunk = map[string]int64{
	"svc_a":        svcAlterMax,
	"svc_b":        svcMaxAdaptive,
	svcAdaptiveSeq: svcMaxAdaptive,
	svcRetiredSeq:  svcChunk,
}

// svcAdmin is the admin load's goroutine and what it did.
type svcAdmin struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu struct {
		sync.Mutex
		alters, failed int
		last           string // the last failure
	}
}

// startAdmin starts the alter loop; stopAdmin ends it and waits.
func (s *svcCampaign) startAdmin(ctx context.Context) *svcAdmin {
	ctx, cancel := context.WithCancel(ctx)
	a := &svcAdmin{cancel: cancel, done: make(chan struct{})}
	rng := rand.New(rand.NewPCG(s.t.rng.Uint64(), 2)) // t.rng is the phase's goroutine's
	go func() {
		defer close(a.done)
		for i := 0; ; i++ {
			if sleep(ctx, svcAlterEvery) != nil {
				return
			}
			seq := []string{"svc_a", "svc_b"}[i%2]
			body := fmt.Sprintf(`{"chunk_size":%d}`, svcAlterMin+rng.IntN(svcAlterMax-svcAlterMin+1))
			if seq == "svc_b" {
				body = fmt.Sprintf(`{"chunk_size":%d,"adaptive":%v}`, svcAlterMin+rng.IntN(svcAlterMax-svcAlterMin+1), rng.IntN(2) == 0)
			}
			in := s.inst[rng.IntN(len(s.inst))]
			_, err := s.call(ctx, http.MethodPatch, in.base()+"/v1/sequences/"+seq, s.admin, body, nil)
			a.mu.Lock()
			if err != nil && ctx.Err() == nil {
				a.mu.failed++ // the instance may be down (a fault): the next tick tries another
				a.mu.last = err.Error()
			} else if err == nil {
				a.mu.alters++
			}
			a.mu.Unlock()
		}
	}()
	return a
}

// stop ends the alter loop and waits for it; it returns a note of what it
// did, and a problem when no alter succeeded.
func (a *svcAdmin) stop() (note, problem string) {
	a.cancel()
	<-a.done
	a.mu.Lock()
	defer a.mu.Unlock()
	note = fmt.Sprintf("admin load: %d alters of svc_a/svc_b under load, %d refused or failed (instances down)", a.mu.alters, a.mu.failed)
	if a.mu.failed > 0 {
		note += "; last: " + a.mu.last
	}
	if a.mu.alters == 0 {
		problem = "no alter succeeded under load"
	}
	return note, problem
}

// retire retires svcRetiredSeq through the first instance that answers
// and records when.
func (s *svcCampaign) retire(ctx context.Context) (svcRetire, error) {
	var last error
	for attempt := range 20 {
		in := s.inst[attempt%len(s.inst)]
		rt := svcRetire{Sent: time.Now()}
		_, err := s.call(ctx, http.MethodDelete, in.base()+"/v1/sequences/"+svcRetiredSeq, s.admin, "", nil)
		if err == nil {
			rt.Acked = time.Now()
			s.t.logf("service: retired %s through instance %d in %.0f ms", svcRetiredSeq, in.idx, float64(rt.Acked.Sub(rt.Sent).Microseconds())/1000)
			return rt, nil
		}
		last = err
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return svcRetire{}, err
		}
	}
	return svcRetire{}, fmt.Errorf("service: retiring %s: %w", svcRetiredSeq, last)
}
