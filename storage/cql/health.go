package cql

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gocql/gocql"
)

// health is the session's view of its hosts' health, shared by its host
// selection policy (healthPolicy), its query and batch observer and its
// hedging policy.
//
// A host is suspected when
//   - it has been silent longer than the suspicion threshold,
//     max(SuspectFloor, SuspectFactor x the p99 of recent healthy replies):
//     an attempt handed to it is outstanding (at most Timeout, which bounds
//     every attempt) or ended unanswered that long after the oldest
//     unanswered hand-out, with no reply from it since; or
//   - an attempt to it got no answer within its attempt timeout, unless
//     that silence was shared: another host's attempt timed out too while
//     this one was in flight and no host replied in that time (the client or
//     the network was silent, not one host). A lone attempt that times out
//     (a session that only renews a lease) suspects its host: there is
//     nothing to compare it with, and a slow Paxos round elsewhere must not
//     raise the threshold above the attempt timeout it is measured against.
//
// A reply from a host (a result, or an error the server sent) re-admits it.
// Suspected hosts go last in every query plan, conditional statements and
// SERIAL reads included. So that a host that answers again is re-admitted,
// an idempotent (hedged) query sends a suspected host a probe, first in its
// plan, at most once per ProbeInterval per host: a probe to a host that is
// still silent costs that query one hedge delay. Connection pools are left
// to gocql: nothing here drops a host.
//
// health owns no goroutine; every method is safe for concurrent use.
type health struct {
	now           func() time.Time
	floor         time.Duration
	factor        float64
	probeInterval time.Duration
	attemptTO     time.Duration
	// callTO bounds every attempt (Timeout): a hand-out with neither a
	// reply nor a timeout observed within it was never sent (gocql asked
	// for a host it then did not use) and no longer counts as outstanding.
	callTO     time.Duration
	hedgeDelay time.Duration // fixed hedge delay; 0: adaptive
	log        *slog.Logger
	// isUp reports whether gocql will send an attempt handed out to a host:
	// it skips a host it sees down without an attempt, hence without the
	// observation that would end the hand-out's pending state.
	isUp func(*gocql.HostInfo) bool

	mu struct {
		sync.Mutex
		hosts     map[string]*hostState
		lastReply time.Time // the last reply from any host
		lat       latencyWindow
		stats     HealthStats
	}
}

// hostState is what health knows of one host.
type hostState struct {
	info         *gocql.HostInfo // the latest seen
	pendingSince time.Time       // the oldest attempt handed out since the last reply; zero: none
	lastReply    time.Time
	timedOutAt   time.Time // an attempt timeout that suspects the host; zero: none since the last reply
	// timedOutAlone: timedOutAt is a lone timeout, no other host's reply
	// in its window to compare with; a timeout of another host in that
	// window withdraws it (a shared silence).
	timedOutAlone bool
	lastTimeout   time.Time // the end of the last attempt that timed out with no answer
	lastProbe     time.Time
	noReplyAt     time.Time // the end of the last attempt observed without a reply
	suspected     bool      // as last evaluated, for the transition logs
}

// HealthStats counts what the health-aware host choice did. Counters are
// cumulative since the session was opened.
type HealthStats struct {
	// Attempts are the statement attempts sent to a host (gocql's
	// executions, retries and hedges).
	Attempts uint64
	// Hedges are speculative attempts: a further host tried while an
	// earlier attempt of the same statement was still outstanding.
	Hedges uint64
	// Retries are attempts after an earlier attempt of the same statement
	// failed.
	Retries uint64
	// Probes are attempts sent to a suspected host to learn whether it
	// answers again.
	Probes uint64
	// Suspicions counts the times a host became suspected.
	Suspicions uint64
	// Suspected lists the hosts suspected now.
	Suspected []string
	// HealthyP99 is the p99 latency of recent successful attempts.
	HealthyP99 time.Duration
}

func newHealth(o *Options, now func() time.Time) *health {
	h := &health{
		now:           now,
		floor:         o.SuspectFloor,
		factor:        o.SuspectFactor,
		probeInterval: o.ProbeInterval,
		attemptTO:     o.AttemptTimeout,
		callTO:        o.Timeout,
		hedgeDelay:    o.HedgeDelay,
		log:           o.Logger,
		isUp:          (*gocql.HostInfo).IsUp,
	}
	h.mu.hosts = map[string]*hostState{}
	return h
}

// zeroHostID is the host ID of a host gocql has not looked up (contact
// points with DisableInitialHostLookup).
const zeroHostID = "00000000-0000-0000-0000-000000000000"

// hostKey identifies a host across the HostInfo copies gocql makes.
func hostKey(hi *gocql.HostInfo) string {
	if id := hi.HostID(); id != "" && id != zeroHostID {
		return id
	}
	return net.JoinHostPort(hi.ConnectAddress().String(), strconv.Itoa(hi.Port()))
}

func (h *health) stateLocked(hi *gocql.HostInfo) *hostState {
	k := hostKey(hi)
	st := h.mu.hosts[k]
	if st == nil {
		st = &hostState{}
		h.mu.hosts[k] = st
	}
	st.info = hi
	return st
}

// thresholdLocked is how long an attempt may be outstanding, with no reply
// from its host, before the host is suspected.
func (h *health) thresholdLocked(now time.Time) time.Duration {
	p99 := h.mu.lat.p99(now)
	return max(h.floor, time.Duration(float64(p99)*h.factor))
}

// suspectedLocked evaluates st at now and logs a transition.
func (h *health) suspectedLocked(st *hostState, now time.Time) bool {
	var reason string
	switch {
	case !st.timedOutAt.IsZero() && st.timedOutAlone:
		reason = "an attempt timed out, no other host timing out with it"
	case !st.timedOutAt.IsZero():
		reason = "an attempt timed out while other hosts answered"
	case h.silentForLocked(st, now) > h.thresholdLocked(now):
		reason = "an attempt is outstanding with no reply since"
	}
	s := reason != ""
	if s && !st.suspected {
		h.mu.stats.Suspicions++
		h.log.Warn("cql: host suspected: it goes last in every query plan until it replies",
			"host", st.info.ConnectAddress().String(), "reason", reason,
			"silent_for", h.silentForLocked(st, now).Round(time.Millisecond), "threshold", h.thresholdLocked(now))
	}
	st.suspected = s
	return s
}

// silentForLocked is how long st has been seen silent: since its oldest
// unanswered hand-out, up to now while an attempt may still be in flight
// (Timeout bounds every attempt), else up to the last attempt that ended
// unanswered. A hand-out gocql never sent, or one cancelled at once with
// nothing handed out since, stops counting after Timeout.
func (h *health) silentForLocked(st *hostState, now time.Time) time.Duration {
	switch {
	case st.pendingSince.IsZero():
		return 0
	case now.Sub(st.pendingSince) <= h.callTO:
		return now.Sub(st.pendingSince)
	case st.noReplyAt.After(st.pendingSince):
		return st.noReplyAt.Sub(st.pendingSince)
	}
	return 0
}

// handOut records that an attempt of the statement tracked by tr goes to hi.
func (h *health) handOut(hi *gocql.HostInfo, tr *callTrack, probe bool) {
	if hi == nil {
		return
	}
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.stateLocked(hi)
	if st.pendingSince.IsZero() && h.isUp(hi) {
		st.pendingSince = now
	}
	if probe {
		st.lastProbe = now
		h.mu.stats.Probes++
	}
	if tr != nil {
		switch tr.handOut() {
		case attemptHedge:
			h.mu.stats.Hedges++
		case attemptRetry:
			h.mu.stats.Retries++
		}
	}
}

// observe records the end of an attempt to hi that started at start.
func (h *health) observe(ctx context.Context, hi *gocql.HostInfo, start, end time.Time, err error) {
	if tr := trackFrom(ctx); tr != nil {
		tr.ended()
	}
	if hi == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mu.stats.Attempts++
	st := h.stateLocked(hi)
	if !replied(err) {
		st.noReplyAt = end
	}
	switch {
	case replied(err):
		if err == nil {
			h.mu.lat.add(end, end.Sub(start))
		}
		if st.suspected {
			silent := "no reply before"
			if !st.lastReply.IsZero() {
				silent = end.Sub(st.lastReply).Round(time.Millisecond).String()
			}
			h.log.Info("cql: host re-admitted: it replied", "host", hi.ConnectAddress().String(), "silent_for", silent)
		}
		st.lastReply, st.pendingSince, st.timedOutAt, st.timedOutAlone, st.suspected = end, time.Time{}, time.Time{}, false, false
		if end.After(h.mu.lastReply) {
			h.mu.lastReply = end
		}
	case errors.Is(err, gocql.ErrTimeoutNoResponse):
		h.timedOutLocked(st, start, end)
	}
}

// timedOutLocked records that an attempt to st, in flight from start to
// end, timed out with no answer.
func (h *health) timedOutLocked(st *hostState, start, end time.Time) {
	st.lastTimeout = end
	// A peer that replied in this attempt's window (or within the last
	// attempt timeout) makes the silence this host's.
	since := end.Add(-h.attemptTO)
	if start.Before(since) {
		since = start
	}
	if h.mu.lastReply.After(since) && h.mu.lastReply.After(st.lastReply) {
		st.timedOutAt, st.timedOutAlone = end, false
		return
	}
	// No peer replied. Peers that timed out in this window too make it a
	// shared silence, the client's or the network's: it suspects nobody,
	// and withdraws the lone timeouts it is made of.
	shared, withdrawn := false, []string(nil)
	for _, o := range h.mu.hosts {
		if o != st && o.lastTimeout.After(since) && o.lastReply.Before(o.lastTimeout) {
			shared = true
			if o.timedOutAlone {
				o.timedOutAt, o.timedOutAlone = time.Time{}, false
				withdrawn = append(withdrawn, o.info.ConnectAddress().String())
			}
		}
	}
	if !shared {
		st.timedOutAt, st.timedOutAlone = end, true
		return
	}
	if len(withdrawn) > 0 { // once per shared silence, not per timeout
		slices.Sort(withdrawn)
		h.log.Warn("cql: attempts to several hosts timed out with no reply from any (the client or the network is silent): their timeouts suspect none of them",
			"host", st.info.ConnectAddress().String(), "withdrawn", withdrawn)
	}
}

// replied reports whether an attempt that ended with err got an answer from
// its host: a result, or an error the server sent.
func replied(err error) bool {
	var re serverError
	return err == nil || errors.Is(err, gocql.ErrNotFound) || errors.As(err, &re)
}

// order returns the plan of next with suspected hosts moved to its end, and
// a probe first where one is due (idempotent statements only).
//
// gocql returns the first execution of a hedged statement that ends, even
// with an error, and a speculative execution that finds the plan exhausted
// ends at once with "no hosts available". So the plan of an idempotent
// statement does not end with its last host: it hands its hosts out again,
// in the same order, up to twice each (the retry policy and the call's
// deadline bound the attempts).
func (h *health) order(next gocql.NextHost, idempotent bool, tr *callTrack) gocql.NextHost {
	var (
		deferred []gocql.SelectedHost
		probe    gocql.SelectedHost
		done     bool
		handed   []gocql.SelectedHost
		repeats  int
		probed   string
	)
	if idempotent {
		probe = h.dueProbe()
	}
	give := func(sh gocql.SelectedHost, probe bool) gocql.SelectedHost {
		handed = append(handed, sh)
		h.handOut(sh.Info(), tr, probe)
		return sh
	}
	return func() gocql.SelectedHost {
		if probe != nil {
			p := probe
			probe, probed = nil, hostKey(p.Info())
			return give(p, true)
		}
		for !done {
			sh := next()
			if sh == nil {
				done = true
				break
			}
			hi := sh.Info()
			if hi == nil || probed != "" && hostKey(hi) == probed {
				continue // the probe, handed out first
			}
			if h.suspected(hi) {
				deferred = append(deferred, sh)
				continue
			}
			return give(sh, false)
		}
		if len(deferred) > 0 {
			sh := deferred[0]
			deferred = deferred[1:]
			return give(sh, false)
		}
		if !idempotent || len(handed) == 0 || repeats >= 2*len(handed) {
			return nil
		}
		sh := handed[repeats%len(handed)]
		repeats++
		h.handOut(sh.Info(), tr, false)
		return sh
	}
}

// suspected reports whether hi is suspected now.
func (h *health) suspected(hi *gocql.HostInfo) bool {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.suspectedLocked(h.stateLocked(hi), now)
}

// dueProbe returns a suspected, up host whose last probe is at least
// ProbeInterval old, or nil. The probe is recorded when it is handed out.
func (h *health) dueProbe() gocql.SelectedHost {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, st := range h.mu.hosts {
		if st.info.IsUp() && now.Sub(st.lastProbe) >= h.probeInterval && h.suspectedLocked(st, now) {
			st.lastProbe = now // one probe per interval, even if this plan never hands it out
			return probeHost{st.info}
		}
	}
	return nil
}

// probeHost is a suspected host handed out first in a plan. It carries no
// token: the pool picks any of the host's connections.
type probeHost struct{ info *gocql.HostInfo }

func (p probeHost) Info() *gocql.HostInfo { return p.info }
func (p probeHost) Token() gocql.Token    { return nil }
func (p probeHost) Mark(error)            {}

// hedgeAfter is the delay before a statement's speculative attempt: the
// fixed HedgeDelay, or the p99 of recent healthy replies, at least 1 ms and
// at most half the attempt timeout.
func (h *health) hedgeAfter() time.Duration {
	if h.hedgeDelay > 0 {
		return h.hedgeDelay
	}
	now := h.now()
	h.mu.Lock()
	p99 := h.mu.lat.p99(now)
	h.mu.Unlock()
	return min(max(p99, time.Millisecond), h.attemptTO/2)
}

// Stats returns a snapshot of the counters and the hosts suspected now.
func (h *health) Stats() HealthStats {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.mu.stats
	s.Suspected = nil
	for _, st := range h.mu.hosts {
		if h.suspectedLocked(st, now) {
			s.Suspected = append(s.Suspected, st.info.ConnectAddress().String())
		}
	}
	slices.Sort(s.Suspected)
	s.HealthyP99 = h.mu.lat.p99(now)
	return s
}

// latencyWindow keeps the latencies of the last len(samples) successful
// attempts and their p99, recomputed at most every 64 samples or 100 ms.
type latencyWindow struct {
	samples  [512]time.Duration
	n        int // samples written in all
	sinceP99 int
	at       time.Time
	cached   time.Duration
	scratch  []time.Duration
}

func (w *latencyWindow) add(now time.Time, d time.Duration) {
	w.samples[w.n%len(w.samples)] = d
	w.n++
	w.sinceP99++
}

func (w *latencyWindow) p99(now time.Time) time.Duration {
	if w.n == 0 {
		return 0
	}
	if w.sinceP99 < 64 && now.Sub(w.at) < 100*time.Millisecond && !w.at.IsZero() {
		return w.cached
	}
	k := min(w.n, len(w.samples))
	w.scratch = append(w.scratch[:0], w.samples[:k]...)
	slices.Sort(w.scratch)
	w.cached = w.scratch[(k*99)/100]
	w.at, w.sinceP99 = now, 0
	return w.cached
}

// healthPolicy is the gocql.HostSelectionPolicy of a session with host
// health: inner's plans, reordered by health.
type healthPolicy struct {
	gocql.HostSelectionPolicy
	h *health
}

func (p healthPolicy) Pick(q gocql.ExecutableQuery) gocql.NextHost {
	next := p.HostSelectionPolicy.Pick(q)
	if q == nil {
		return p.h.order(next, false, nil)
	}
	return p.h.order(next, q.IsIdempotent(), trackFrom(q.Context()))
}

// healthObserver feeds every attempt's end to health.
type healthObserver struct{ h *health }

func (o healthObserver) ObserveQuery(ctx context.Context, q gocql.ObservedQuery) {
	o.h.observe(ctx, q.Host, q.Start, q.End, q.Err)
}

func (o healthObserver) ObserveBatch(ctx context.Context, b gocql.ObservedBatch) {
	o.h.observe(ctx, b.Host, b.Start, b.End, b.Err)
}

// hedging is the speculative execution policy of idempotent statements:
// one speculative attempt after health's hedge delay.
type hedging struct{ h *health }

func (s hedging) Attempts() int        { return 1 }
func (s hedging) Delay() time.Duration { return s.h.hedgeAfter() }
