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

// Host health comes in three layers:
//   - hostHealth, one host's state machine, and healthBook, every host's
//     machine with the session-wide facts its rules compare against (the
//     last reply from any host, the healthy latencies), in health_book.go.
//     Both are plain, synchronous types: events in (an attempt handed out,
//     an attempt ended with a reply, a timeout or no answer, a probe handed
//     out; the time of each event given by the caller), a verdict out
//     (suspicion). They hold no lock, read no clock, log nothing and count
//     nothing.
//   - health, the driver: it holds the lock and the clock, feeds gocql's
//     events to the book, and logs and counts the transitions it sees.
//   - healthPolicy, healthObserver, hedging and healthPlan connect the
//     driver to gocql.

// Why not gocql's policies alone: gocql drops a host from plans only when
// its connections fail, and a paused or cut-off node (a long GC pause, a
// SIGSTOP) keeps them open; its token-aware plans then keep sending every
// statement whose primary replica is that node, each waiting out the
// timeout, and the conditional epoch claims of its partitions with them.
// Measured on the 3-node cluster at RF 3, node 2 SIGSTOPped 10 s under load
// (docs/gray-failure.md, make gray-check): with DisableHealth (gocql's host
// choice, the behaviour before) the acknowledged commands/s fell from 395
// to 1.0 in trust2 and from 832 to 0.3 in fenced; with this layer they rose
// during the pause (625 -> 741 trust2, 721 -> 1,092 fenced, quiet machine).
// A coordinator that refuses every statement (the campaign's one-way cut,
// TestHealthACoordinatorThatRefusesGoesLastUntilItServes) is the other
// case no gocql policy covers.

// health drives the session's healthBook from gocql's host choices and
// attempt ends (healthPolicy, healthObserver), and serves the hedging
// policy.
//
// Suspected hosts go last in every query plan, conditional statements and
// SERIAL reads included. So that a host that answers again is re-admitted,
// an idempotent (hedged) query sends a suspected host a probe, first in its
// plan, at most once per ProbeInterval per host: a probe to a host that is
// still silent costs that query one hedge delay. Connection pools are left
// to gocql: nothing here drops a host.
//
// The reads (the book's verdict, Stats, hedgeAfter) log nothing and count
// nothing; what they change is only the latency window's memoized p99. A
// host's becoming suspected is logged and counted when a query plan finds
// it so (judge, claimProbe), in one place, reportLocked; a reply that
// re-admits it is logged when observed.
//
// health owns no goroutine; every method is safe for concurrent use.
type health struct {
	now           func() time.Time
	probeInterval time.Duration
	attemptTO     time.Duration
	hedgeDelay    time.Duration // fixed hedge delay; 0: adaptive
	log           *slog.Logger
	// isUp reports whether gocql will send an attempt handed out to a host:
	// it skips a host it sees down without an attempt, hence without the
	// observation that would end the hand-out.
	isUp func(*gocql.HostInfo) bool

	mu struct {
		sync.Mutex
		book  healthBook
		hosts map[string]*hostEntry
		stats HealthStats
	}
}

// hostEntry is what the driver keeps of a host besides its machine.
type hostEntry struct {
	info *gocql.HostInfo // the latest seen
	// reported: the host's suspicion as last logged, for the transition
	// logs and the Suspicions counter.
	reported bool
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
	// Suspicions counts the times a query plan found a host newly
	// suspected.
	Suspicions uint64
	// Suspected lists the hosts suspected now.
	Suspected []string
	// HealthyP99 is the p99 latency of recent successful attempts.
	HealthyP99 time.Duration
}

func newHealth(o *Options, now func() time.Time) *health {
	h := &health{
		now:           now,
		probeInterval: o.ProbeInterval,
		attemptTO:     o.AttemptTimeout,
		hedgeDelay:    o.HedgeDelay,
		log:           o.Logger,
		isUp:          (*gocql.HostInfo).IsUp,
	}
	h.mu.book = newHealthBook(healthLimits{floor: o.SuspectFloor, factor: o.SuspectFactor, attemptTO: o.AttemptTimeout, callTO: o.Timeout})
	h.mu.hosts = map[string]*hostEntry{}
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

// entryLocked returns the entry of hi, recording hi as its latest info.
func (h *health) entryLocked(hi *gocql.HostInfo) (string, *hostEntry) {
	k := hostKey(hi)
	e := h.mu.hosts[k]
	if e == nil {
		e = &hostEntry{}
		h.mu.hosts[k] = e
	}
	e.info = hi
	return k, e
}

// reportLocked records s, the verdict a plan found of e's host (silent for
// silent, judged against th): a new suspicion is logged and counted, once
// per transition however many plans find it. It is the one place that logs
// and counts suspicions.
func (h *health) reportLocked(e *hostEntry, s suspicion, silent, th time.Duration) {
	suspected := s != notSuspected
	if suspected && !e.reported {
		h.mu.stats.Suspicions++
		until := "until it replies"
		if s == suspectRefused {
			until = "until it serves a statement"
		}
		h.log.Warn("cql: host suspected: it goes last in every query plan "+until,
			"host", e.info.ConnectAddress().String(), "reason", s.String(),
			"silent_for", silent.Round(time.Millisecond), "threshold", th)
	}
	e.reported = suspected
}

// handOut records that an attempt of the statement tracked by tr goes to hi.
func (h *health) handOut(hi *gocql.HostInfo, tr *callTrack, probe bool) {
	if hi == nil {
		return
	}
	now := h.now()
	up := h.isUp(hi)
	h.mu.Lock()
	defer h.mu.Unlock()
	k, _ := h.entryLocked(hi)
	if up {
		h.mu.book.handOut(k, now)
	}
	if probe {
		h.mu.book.probed(k, now)
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
	k, e := h.entryLocked(hi)
	switch {
	case replied(err):
		prev := h.mu.book.host(k).lastReply
		h.mu.book.replied(k, start, end, err == nil, coordinatorRefused(err))
		if v, _, _ := h.mu.book.verdict(k, end); e.reported && v == notSuspected {
			silent := "no reply before"
			if !prev.IsZero() {
				silent = end.Sub(prev).Round(time.Millisecond).String()
			}
			h.log.Info("cql: host re-admitted: it replied", "host", hi.ConnectAddress().String(), "silent_for", silent)
			e.reported = false
		}
	case errors.Is(err, gocql.ErrTimeoutNoResponse):
		if withdrawn := h.mu.book.timedOut(k, start, end); len(withdrawn) > 0 { // once per shared silence
			addrs := make([]string, 0, len(withdrawn))
			for _, w := range withdrawn {
				addrs = append(addrs, h.mu.hosts[w].info.ConnectAddress().String())
			}
			slices.Sort(addrs)
			h.log.Warn("cql: attempts to several hosts timed out with no reply from any (the client or the network is silent): their timeouts suspect none of them",
				"host", hi.ConnectAddress().String(), "withdrawn", addrs)
		}
	default:
		h.mu.book.unanswered(k, start, end)
	}
}

// coordinatorRefused reports whether err is a coordinator's refusal to run
// a statement: unavailable (it holds too few replicas alive), overloaded or
// bootstrapping. Another coordinator may run it.
func coordinatorRefused(err error) bool {
	var (
		ue *gocql.RequestErrUnavailable
		re serverError
	)
	switch {
	case errors.As(err, &ue):
		return true
	case errors.As(err, &re):
		c := re.GetCode()
		return c == gocql.ErrCodeUnavailable || c == gocql.ErrCodeOverloaded || c == gocql.ErrCodeBootstrapping
	}
	return false
}

// replied reports whether an attempt that ended with err got an answer from
// its host: a result, or an error the server sent.
func replied(err error) bool {
	var re serverError
	return err == nil || errors.Is(err, gocql.ErrNotFound) || errors.As(err, &re)
}

// order returns the plan of next reordered by health (see healthPlan),
// with the probe it claims first if idempotent.
func (h *health) order(next gocql.NextHost, idempotent bool, tr *callTrack) gocql.NextHost {
	p := &healthPlan{h: h, inner: next, idempotent: idempotent, tr: tr}
	if idempotent {
		p.probe = h.claimProbe()
	}
	return p.next
}

// healthPlan is one statement's query plan: its inner plan with suspected
// hosts moved to the end, and a probe first where one is due (idempotent
// statements only).
//
// gocql returns the first execution of a hedged statement that ends, even
// with an error, and a speculative execution that finds the plan exhausted
// ends at once with "no hosts available". So the plan of an idempotent
// statement does not end with its last host: it hands its hosts out again,
// in the same order, up to twice each (the retry policy and the call's
// deadline bound the attempts).
//
// A plan is used by one statement; gocql calls next from the goroutines of
// the statement's executions one at a time.
type healthPlan struct {
	h          *health
	inner      gocql.NextHost
	idempotent bool
	tr         *callTrack
	probe      gocql.SelectedHost // handed out first; nil once handed out
	probed     string             // the probe's host key, skipped in inner
	innerDone  bool
	deferred   []gocql.SelectedHost // suspected hosts of inner, in its order
	handed     []gocql.SelectedHost
	repeats    int
}

func (p *healthPlan) give(sh gocql.SelectedHost, probe bool) gocql.SelectedHost {
	p.handed = append(p.handed, sh)
	p.h.handOut(sh.Info(), p.tr, probe)
	return sh
}

// next is the plan's gocql.NextHost.
func (p *healthPlan) next() gocql.SelectedHost {
	if p.probe != nil {
		sh := p.probe
		p.probe, p.probed = nil, hostKey(sh.Info())
		return p.give(sh, true)
	}
	for !p.innerDone {
		sh := p.inner()
		if sh == nil {
			p.innerDone = true
			break
		}
		hi := sh.Info()
		if hi == nil || p.probed != "" && hostKey(hi) == p.probed {
			continue // the probe, handed out first
		}
		if p.h.judge(hi) {
			p.deferred = append(p.deferred, sh)
			continue
		}
		return p.give(sh, false)
	}
	if len(p.deferred) > 0 {
		sh := p.deferred[0]
		p.deferred = p.deferred[1:]
		return p.give(sh, false)
	}
	if !p.idempotent || len(p.handed) == 0 || p.repeats >= 2*len(p.handed) {
		return nil
	}
	sh := p.handed[p.repeats%len(p.handed)]
	p.repeats++
	p.h.handOut(sh.Info(), p.tr, false)
	return sh
}

// judge is a plan's look at hi: it returns whether hi is suspected now,
// hence goes last, and reports the verdict (reportLocked).
func (h *health) judge(hi *gocql.HostInfo) bool {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	k, e := h.entryLocked(hi)
	s, silent, th := h.mu.book.verdict(k, now)
	h.reportLocked(e, s, silent, th)
	return s != notSuspected
}

// claimProbe claims the probe of a suspected, up host whose last probe is
// at least ProbeInterval old, and returns the host, or nil. The probe is
// recorded at once, one per interval even if the plan never hands it out
// (and counted when handed out). The verdicts it reads on the way are
// reported (reportLocked): the probed host is not judged again by its plan.
func (h *health) claimProbe() gocql.SelectedHost {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, e := range h.mu.hosts {
		if !e.info.IsUp() || now.Sub(h.mu.book.host(k).lastProbe) < h.probeInterval {
			continue
		}
		s, silent, th := h.mu.book.verdict(k, now)
		h.reportLocked(e, s, silent, th)
		if s != notSuspected {
			h.mu.book.probed(k, now)
			return probeHost{e.info}
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
	p99 := h.mu.book.lat.p99(now)
	h.mu.Unlock()
	return min(max(p99, time.Millisecond), h.attemptTO/2)
}

// Stats returns a snapshot of the counters and the hosts suspected now. It
// logs nothing and counts nothing.
func (h *health) Stats() HealthStats {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.mu.stats
	s.Suspected = nil
	for k, e := range h.mu.hosts {
		if v, _, _ := h.mu.book.verdict(k, now); v != notSuspected {
			s.Suspected = append(s.Suspected, e.info.ConnectAddress().String())
		}
	}
	slices.Sort(s.Suspected)
	s.HealthyP99 = h.mu.book.lat.p99(now)
	return s
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

// healthObserver feeds every attempt's end to health. gocql times
// attempts by the system clock and health reads Options.Now: the observer
// moves an attempt's start and end onto health's clock, so that they
// compare with its hand-outs.
type healthObserver struct{ h *health }

func (o healthObserver) ObserveQuery(ctx context.Context, q gocql.ObservedQuery) {
	start, end := o.onHealthClock(q.Start, q.End)
	o.h.observe(ctx, q.Host, start, end, q.Err)
}

func (o healthObserver) ObserveBatch(ctx context.Context, b gocql.ObservedBatch) {
	start, end := o.onHealthClock(b.Start, b.End)
	o.h.observe(ctx, b.Host, start, end, b.Err)
}

func (o healthObserver) onHealthClock(start, end time.Time) (time.Time, time.Time) {
	skew := time.Until(o.h.now())
	return start.Add(skew), end.Add(skew)
}

// hedging is the speculative execution policy of idempotent statements:
// one speculative attempt after health's hedge delay.
type hedging struct{ h *health }

func (s hedging) Attempts() int        { return 1 }
func (s hedging) Delay() time.Duration { return s.h.hedgeAfter() }
