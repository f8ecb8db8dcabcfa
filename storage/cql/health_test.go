package cql

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeClock is a manual clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// fakeHost is a SelectedHost of a test plan.
type fakeHost struct{ info *gocql.HostInfo }

func (f fakeHost) Info() *gocql.HostInfo { return f.info }
func (f fakeHost) Token() gocql.Token    { return nil }
func (f fakeHost) Mark(error)            {}

func newFakeHost(i int) *gocql.HostInfo {
	hi := gocql.HostInfoBuilder{
		HostId:         "00000000-0000-0000-0000-00000000000" + string(rune('0'+i)),
		ConnectAddress: net.IPv4(127, 0, 0, byte(i)),
		Port:           9042,
	}.Build()
	return &hi
}

// healthFixture is a health over three fake hosts whose inner plan is
// always A, B, C (token awareness without shuffling).
type healthFixture struct {
	t       *testing.T
	clk     *fakeClock
	h       *health
	a, b, c *gocql.HostInfo
}

func newHealthFixture(t *testing.T, mod func(*Options)) *healthFixture {
	o := Options{Hosts: []string{"x"}, Keyspace: "ks", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mod != nil {
		mod(&o)
	}
	o.EnsureDefaults()
	require.NoError(t, o.Validate())
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	return &healthFixture{t: t, clk: clk, h: newHealth(&o, clk.now), a: newFakeHost(1), b: newFakeHost(2), c: newFakeHost(3)}
}

func (f *healthFixture) inner() gocql.NextHost {
	hosts := []*gocql.HostInfo{f.a, f.b, f.c}
	return func() gocql.SelectedHost {
		if len(hosts) == 0 {
			return nil
		}
		h := hosts[0]
		hosts = hosts[1:]
		return fakeHost{h}
	}
}

// plan returns the first three hosts of a statement's plan (each host
// once), handing them out.
func (f *healthFixture) plan(idempotent bool) []*gocql.HostInfo {
	next := f.h.order(f.inner(), idempotent, nil)
	var out []*gocql.HostInfo
	for sh := next(); sh != nil && len(out) < 3; sh = next() {
		out = append(out, sh.Info())
	}
	return out
}

// first hands out the first host of a statement's plan (an attempt
// starts) and returns it.
func (f *healthFixture) first(idempotent bool) *gocql.HostInfo {
	return f.h.order(f.inner(), idempotent, nil)().Info()
}

// reply records a successful attempt to hi that took d and ended now.
func (f *healthFixture) reply(hi *gocql.HostInfo, d time.Duration) {
	f.h.observe(context.Background(), hi, f.clk.now().Add(-d), f.clk.now(), nil)
}

// warm gives the latency window n healthy replies of d from B and C.
func (f *healthFixture) warm(n int, d time.Duration) {
	for range n {
		f.reply(f.b, d)
		f.reply(f.c, d)
	}
}

func TestHealthPlanKeepsInnerOrderWhenAllAreHealthy(t *testing.T) {
	f := newHealthFixture(t, nil)
	f.warm(50, 2*time.Millisecond)
	assert.Equal(t, []*gocql.HostInfo{f.a, f.b, f.c}, f.plan(false))
	assert.Equal(t, []*gocql.HostInfo{f.a, f.b, f.c}, f.plan(true))
	assert.Empty(t, f.h.Stats().Suspected)
}

func TestHealthSuspectsAHostWhoseAttemptIsOutstandingPastTheThreshold(t *testing.T) {
	f := newHealthFixture(t, nil)
	f.warm(50, 2*time.Millisecond) // p99 2 ms: the threshold is the 100 ms floor
	require.Equal(t, f.a, f.first(false), "an attempt to A starts")

	f.clk.advance(90 * time.Millisecond)
	f.warm(1, 2*time.Millisecond)
	assert.Equal(t, []*gocql.HostInfo{f.a, f.b, f.c}, f.plan(false), "90 ms outstanding: under the threshold")

	f.clk.advance(20 * time.Millisecond)
	assert.Equal(t, []*gocql.HostInfo{f.b, f.c, f.a}, f.plan(false), "110 ms with no reply from A: A goes last, LWTs included")
	st := f.h.Stats()
	assert.Equal(t, []string{"127.0.0.1"}, st.Suspected)
	assert.EqualValues(t, 1, st.Suspicions)

	// The first reply re-admits it.
	f.reply(f.a, 120*time.Millisecond)
	assert.Equal(t, []*gocql.HostInfo{f.a, f.b, f.c}, f.plan(false))
	assert.Empty(t, f.h.Stats().Suspected)
}

func TestHealthThresholdFollowsTheHealthyP99(t *testing.T) {
	f := newHealthFixture(t, nil)
	f.warm(100, 50*time.Millisecond) // p99 50 ms x 10: 500 ms
	require.Equal(t, f.a, f.first(false))
	f.clk.advance(400 * time.Millisecond)
	assert.Equal(t, f.a, f.plan(false)[0], "400 ms < 10 x p99")
	f.clk.advance(200 * time.Millisecond)
	assert.Equal(t, []*gocql.HostInfo{f.b, f.c, f.a}, f.plan(false), "600 ms > 10 x p99")
}

func TestHealthAReplyToAnyAttemptClearsTheOutstandingOne(t *testing.T) {
	// A slow statement on a host that answers others is the statement's
	// slowness, not the host's.
	f := newHealthFixture(t, nil)
	f.warm(50, 2*time.Millisecond)
	require.Equal(t, f.a, f.first(false))
	for range 10 {
		f.clk.advance(50 * time.Millisecond)
		f.reply(f.a, 2*time.Millisecond)
	}
	assert.Equal(t, f.a, f.plan(false)[0])
}

func TestHealthAnAttemptTimeoutWhilePeersAnswerSuspectsAtOnce(t *testing.T) {
	f := newHealthFixture(t, nil)
	f.warm(50, 2*time.Millisecond)
	f.clk.advance(10 * time.Millisecond)
	// The timeout is reported without a prior hand-out (a plan we did not see).
	f.h.observe(context.Background(), f.a, f.clk.now().Add(-time.Second), f.clk.now(), gocql.ErrTimeoutNoResponse)
	assert.Equal(t, []*gocql.HostInfo{f.b, f.c, f.a}, f.plan(false))
}

func TestHealthAClusterWideSilenceSuspectsNobodyByTimeouts(t *testing.T) {
	// The client (or the whole cluster) stalled: no host answered within the
	// last attempt timeout, so a timeout says nothing about one host.
	f := newHealthFixture(t, nil)
	f.warm(50, 2*time.Millisecond)
	f.clk.advance(3 * time.Second)
	for _, hi := range []*gocql.HostInfo{f.a, f.b, f.c} {
		f.h.observe(context.Background(), hi, f.clk.now().Add(-time.Second), f.clk.now(), gocql.ErrTimeoutNoResponse)
	}
	assert.Equal(t, []*gocql.HostInfo{f.a, f.b, f.c}, f.plan(false))
	assert.Empty(t, f.h.Stats().Suspected, "the first timeout, alone when observed, is withdrawn by the others")
}

func TestHealthOnlyAnAnswerReadmits(t *testing.T) {
	f := newHealthFixture(t, nil)
	f.warm(50, 2*time.Millisecond)
	f.h.observe(context.Background(), f.a, f.clk.now().Add(-time.Second), f.clk.now(), gocql.ErrTimeoutNoResponse)
	require.Equal(t, f.b, f.plan(false)[0])

	// A hedge's loser cancelled, a broken connection: no answer.
	f.h.observe(context.Background(), f.a, f.clk.now(), f.clk.now(), context.Canceled)
	f.h.observe(context.Background(), f.a, f.clk.now(), f.clk.now(), gocql.ErrConnectionClosed)
	assert.Equal(t, f.b, f.plan(false)[0])

	// An error the server sent is an answer.
	f.h.observe(context.Background(), f.a, f.clk.now(), f.clk.now(), &gocql.RequestErrWriteTimeout{})
	assert.Equal(t, f.a, f.plan(false)[0])
}

// TestHealthACoordinatorThatRefusesGoesLastUntilItServes: after a network
// partition healed, a Cassandra node whose failure detector still held the
// others down answered every statement it coordinated with Unavailable;
// token-aware plans kept sending a partition's conditional writes to it,
// and the partition could not be opened for minutes (the campaign's
// partition phase). A refusal (unavailable, overloaded, bootstrapping)
// suspects its host until it serves a statement; a timeout or another
// server error from it changes nothing of that.
func TestHealthACoordinatorThatRefusesGoesLastUntilItServes(t *testing.T) {
	f := newHealthFixture(t, nil)
	f.warm(50, 2*time.Millisecond)
	require.Equal(t, []*gocql.HostInfo{f.a, f.b, f.c}, f.plan(false))

	f.h.observe(context.Background(), f.a, f.clk.now().Add(-time.Millisecond), f.clk.now(), &gocql.RequestErrUnavailable{Consistency: gocql.LocalSerial, Required: 2, Alive: 1})
	assert.Equal(t, []*gocql.HostInfo{f.b, f.c, f.a}, f.plan(false), "a conditional statement goes elsewhere first")
	f.clk.advance(time.Minute)
	assert.Equal(t, []*gocql.HostInfo{f.b, f.c, f.a}, f.plan(false), "until it serves, whatever the time")

	f.h.observe(context.Background(), f.a, f.clk.now(), f.clk.now(), &gocql.RequestErrWriteTimeout{})
	assert.Equal(t, f.b, f.plan(false)[0], "another server error does not re-admit it")
	f.reply(f.a, time.Millisecond)
	assert.Equal(t, []*gocql.HostInfo{f.a, f.b, f.c}, f.plan(false), "a result re-admits it")

	// When every coordinator refuses (a quorum is lost), the order is the inner one.
	for _, hi := range []*gocql.HostInfo{f.a, f.b, f.c} {
		f.h.observe(context.Background(), hi, f.clk.now(), f.clk.now(), &gocql.RequestErrUnavailable{})
	}
	assert.Equal(t, []*gocql.HostInfo{f.a, f.b, f.c}, f.plan(false))
	assert.True(t, coordinatorRefused(&gocql.RequestErrUnavailable{}))
	assert.False(t, coordinatorRefused(&gocql.RequestErrWriteTimeout{}))
	assert.False(t, coordinatorRefused(gocql.ErrTimeoutNoResponse))
}

func TestHealthProbesASuspectedHostWithIdempotentStatementsOnly(t *testing.T) {
	f := newHealthFixture(t, nil) // ProbeInterval 1 s
	f.warm(50, 2*time.Millisecond)
	f.h.observe(context.Background(), f.a, f.clk.now().Add(-time.Second), f.clk.now(), gocql.ErrTimeoutNoResponse)

	assert.Equal(t, []*gocql.HostInfo{f.b, f.c, f.a}, f.plan(false), "a conditional statement never probes")
	assert.Equal(t, []*gocql.HostInfo{f.a, f.b, f.c}, f.plan(true), "a hedged read probes A first")
	assert.Equal(t, []*gocql.HostInfo{f.b, f.c, f.a}, f.plan(true), "one probe per interval")
	f.clk.advance(500 * time.Millisecond)
	f.warm(1, 2*time.Millisecond)
	assert.Equal(t, f.b, f.plan(true)[0])
	f.clk.advance(600 * time.Millisecond)
	f.warm(1, 2*time.Millisecond)
	assert.Equal(t, []*gocql.HostInfo{f.a, f.b, f.c}, f.plan(true), "the next interval's probe; A is handed out once")
	assert.EqualValues(t, 2, f.h.Stats().Probes)
}

func TestHealthCountsHedgesAndRetries(t *testing.T) {
	f := newHealthFixture(t, nil)
	ctx := withTrack(context.Background())
	tr := trackFrom(ctx)
	next := f.h.order(f.inner(), true, tr)

	require.Equal(t, f.a, next().Info()) // first attempt
	require.Equal(t, f.b, next().Info()) // A still outstanding: a hedge
	f.h.observe(ctx, f.a, f.clk.now(), f.clk.now(), gocql.ErrTimeoutNoResponse)
	f.h.observe(ctx, f.b, f.clk.now(), f.clk.now(), gocql.ErrTimeoutNoResponse)
	require.Equal(t, f.c, next().Info()) // both ended: a retry

	st := f.h.Stats()
	assert.EqualValues(t, 1, st.Hedges)
	assert.EqualValues(t, 1, st.Retries)
	assert.EqualValues(t, 2, st.Attempts)
}

func TestHealthPlanOfAnIdempotentStatementHandsItsHostsOutAgain(t *testing.T) {
	// gocql returns a speculative execution that finds no host ("no hosts
	// available") as the statement's result: the plan must not run dry
	// before the retry policy and the deadline end the attempts.
	f := newHealthFixture(t, nil)
	var got []*gocql.HostInfo
	next := f.h.order(f.inner(), true, nil)
	for sh := next(); sh != nil; sh = next() {
		got = append(got, sh.Info())
		require.Less(t, len(got), 100, "the plan must end")
	}
	assert.Equal(t, []*gocql.HostInfo{f.a, f.b, f.c, f.a, f.b, f.c, f.a, f.b, f.c}, got)

	var lwt []*gocql.HostInfo
	next = f.h.order(f.inner(), false, nil)
	for sh := next(); sh != nil; sh = next() {
		lwt = append(lwt, sh.Info())
	}
	assert.Equal(t, []*gocql.HostInfo{f.a, f.b, f.c}, lwt, "a conditional statement's plan is each host once")
}

func TestHealthHedgeDelay(t *testing.T) {
	f := newHealthFixture(t, nil)
	assert.Equal(t, time.Millisecond, f.h.hedgeAfter(), "no samples: the 1 ms floor")
	f.warm(100, 30*time.Millisecond)
	assert.Equal(t, 30*time.Millisecond, f.h.hedgeAfter(), "the healthy p99")
	f.clk.advance(time.Second)
	f.warm(300, 900*time.Millisecond)
	assert.Equal(t, 500*time.Millisecond, f.h.hedgeAfter(), "at most half the attempt timeout")

	fixed := newHealthFixture(t, func(o *Options) { o.HedgeDelay = 7 * time.Millisecond })
	fixed.warm(100, 30*time.Millisecond)
	assert.Equal(t, 7*time.Millisecond, fixed.h.hedgeAfter())
}

func TestIdempotentRetryPolicy(t *testing.T) {
	var r idempotentRetry
	assert.Equal(t, gocql.RetryNextHost, r.GetRetryType(gocql.ErrTimeoutNoResponse))
	assert.Equal(t, gocql.RetryNextHost, r.GetRetryType(&gocql.RequestErrWriteTimeout{}))
	assert.Equal(t, gocql.RetryNextHost, r.GetRetryType(gocql.ErrConnectionClosed))
	assert.Equal(t, gocql.Rethrow, r.GetRetryType(context.DeadlineExceeded))
	assert.Equal(t, gocql.Rethrow, r.GetRetryType(gocql.ErrNotFound))
}

func TestClientClockIsStrictlyIncreasing(t *testing.T) {
	c := monotonicMicros{now: time.Now}
	c.last.Store(time.Now().Add(time.Hour).UnixMicro()) // a clock that stepped back
	prev := c.next()
	for range 1000 {
		ts := c.next()
		require.Greater(t, ts, prev)
		prev = ts
	}
}

func TestOptionsValidateTheAttemptKnobs(t *testing.T) {
	o := Options{Hosts: []string{"h"}, Keyspace: "ks"}
	o.EnsureDefaults()
	require.NoError(t, o.Validate())
	assert.Equal(t, time.Second, o.AttemptTimeout)
	assert.Equal(t, 4*time.Second, o.LWTAttemptTimeout)
	assert.Equal(t, 100*time.Millisecond, o.SuspectFloor)
	assert.InDelta(t, 10, o.SuspectFactor, 0)

	short := Options{Hosts: []string{"h"}, Keyspace: "ks", Timeout: 500 * time.Millisecond}
	short.EnsureDefaults()
	require.NoError(t, short.Validate())
	assert.Equal(t, 500*time.Millisecond, short.AttemptTimeout, "never above Timeout")

	bad := Options{Hosts: []string{"h"}, Keyspace: "ks", AttemptTimeout: 6 * time.Second, LWTAttemptTimeout: 5 * time.Second, SuspectFloor: -1, HedgeDelay: 7 * time.Second}
	bad.EnsureDefaults()
	err := bad.Validate()
	for _, w := range []string{"AttemptTimeout 6s", "LWTAttemptTimeout 5s", "negative SuspectFloor", "HedgeDelay 7s"} {
		assert.ErrorContains(t, err, w)
	}
}

// TestHealthAHandOutToADownHostIsNoAttempt: gocql skips a host it sees
// down without an attempt (so without an observation); such a hand-out
// must not leave the host pending, or it would be suspected for a silence
// nobody measured once it is up again.
func TestHealthAHandOutToADownHostIsNoAttempt(t *testing.T) {
	f := newHealthFixture(t, nil)
	f.warm(50, 2*time.Millisecond)
	down := map[*gocql.HostInfo]bool{f.a: true}
	f.h.isUp = func(hi *gocql.HostInfo) bool { return !down[hi] }
	require.Equal(t, f.a, f.first(false), "A is handed out; gocql skips it")
	f.clk.advance(time.Minute)
	f.warm(1, 2*time.Millisecond)
	delete(down, f.a)
	assert.Equal(t, []*gocql.HostInfo{f.a, f.b, f.c}, f.plan(false), "A is up again and was never sent an attempt")
	assert.Empty(t, f.h.Stats().Suspected)
}

// TestHealthAHandOutNeverSentExpires: gocql may take a host from a plan and
// not send it an attempt; with neither a reply nor an unanswered attempt
// observed within Timeout (which bounds every attempt), the hand-out no
// longer makes the host suspected. An attempt observed without a reply
// keeps it suspected.
func TestHealthAHandOutNeverSentExpires(t *testing.T) {
	f := newHealthFixture(t, nil) // Timeout 5 s
	f.warm(50, 2*time.Millisecond)
	require.Equal(t, f.a, f.first(false), "A is handed out and never sent")
	f.clk.advance(4 * time.Second)
	f.warm(1, 2*time.Millisecond)
	assert.Equal(t, f.b, f.first(false), "4 s: within Timeout, A may still be outstanding (A is not handed out again)")
	f.warm(1, 2*time.Millisecond)
	f.clk.advance(2 * time.Second)
	f.warm(1, 2*time.Millisecond)
	assert.Equal(t, f.a, f.plan(false)[0], "6 s with nothing observed: the hand-out was never sent")

	g := newHealthFixture(t, nil)
	g.warm(50, 2*time.Millisecond)
	require.Equal(t, g.a, g.first(false))
	g.clk.advance(4 * time.Second)
	g.h.observe(context.Background(), g.a, g.clk.now().Add(-4*time.Second), g.clk.now(), gocql.ErrTimeoutNoResponse)
	g.clk.advance(2 * time.Second)
	g.warm(1, 2*time.Millisecond)
	assert.Equal(t, g.b, g.plan(false)[0], "an attempt that timed out keeps A suspected past Timeout")
}

func TestHealthALoneRenewalThatTimedOutSuspectsItsHost(t *testing.T) {
	// A session that only renews a lease: one conditional write every few
	// seconds, Paxos rounds slow (1.4 s) while a replica is paused and not
	// yet convicted by gossip. The renewal sent to the paused A times out
	// after LWTAttemptTimeout with nothing else in flight; its retry must
	// go to another coordinator.
	f := newHealthFixture(t, nil) // Timeout 5 s, LWTAttemptTimeout 4 s
	for range 3 {
		f.reply(f.b, 1400*time.Millisecond)
		f.clk.advance(3 * time.Second)
		f.reply(f.c, 1400*time.Millisecond)
		f.clk.advance(3 * time.Second)
	}
	require.Equal(t, f.a, f.first(false))
	f.clk.advance(4 * time.Second)
	f.h.observe(context.Background(), f.a, f.clk.now().Add(-4*time.Second), f.clk.now(), gocql.ErrTimeoutNoResponse)
	f.clk.advance(time.Millisecond)
	assert.Equal(t, []*gocql.HostInfo{f.b, f.c, f.a}, f.plan(false))
}

func TestHealthAnAttemptCancelledAtOnceIsNoLongSilence(t *testing.T) {
	// A hedge's loser, cancelled 8 ms after it began, and nothing handed to
	// A after it: A was not silent for long, however late the next plan.
	f := newHealthFixture(t, nil)
	f.warm(50, 2*time.Millisecond)
	require.Equal(t, f.a, f.first(true))
	f.clk.advance(8 * time.Millisecond)
	f.h.observe(context.Background(), f.a, f.clk.now().Add(-8*time.Millisecond), f.clk.now(), context.Canceled)
	f.clk.advance(200 * time.Millisecond)
	f.warm(1, 2*time.Millisecond)
	assert.Equal(t, f.b, f.plan(false)[0], "within Timeout: A may still be silent")
	f.warm(1, 2*time.Millisecond)
	f.clk.advance(17 * time.Second)
	f.warm(1, 2*time.Millisecond)
	assert.Equal(t, f.a, f.plan(false)[0], "17 s later: 8 ms without a reply is no reason to suspect A")
}

func TestHealthAHostWhoseAttemptsAreAllOvertakenStaysSuspected(t *testing.T) {
	// A paused host under hedged reads: every attempt to it is cancelled
	// when the hedge to another host wins, none times out. Its silence
	// keeps growing past Timeout.
	f := newHealthFixture(t, nil)
	f.warm(50, 2*time.Millisecond)
	for range 80 {
		next := f.h.order(f.inner(), true, nil)
		var first *gocql.HostInfo
		for sh := next(); sh != nil; sh = next() {
			if hi := sh.Info(); hi == f.a {
				first = hi
				break
			}
		}
		require.NotNil(t, first)
		f.clk.advance(7 * time.Millisecond)
		f.h.observe(context.Background(), f.a, f.clk.now().Add(-7*time.Millisecond), f.clk.now(), context.Canceled)
		f.warm(1, 2*time.Millisecond) // B wins; C, handed out before A, answers too
		f.clk.advance(93 * time.Millisecond)
	}
	assert.Equal(t, []*gocql.HostInfo{f.b, f.c, f.a}, f.plan(false), "8 s of attempts without a reply")
}

func TestHealthStatsNeitherLogsNorCounts(t *testing.T) {
	var logs bytes.Buffer
	f := newHealthFixture(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	f.warm(50, 2*time.Millisecond)
	require.Equal(t, f.a, f.first(false))
	f.clk.advance(200 * time.Millisecond)

	st := f.h.Stats()
	assert.Equal(t, []string{"127.0.0.1"}, st.Suspected, "a scrape sees the suspicion")
	assert.Zero(t, st.Suspicions)
	assert.Empty(t, logs.String(), "a scrape logs nothing")

	assert.Equal(t, f.b, f.plan(false)[0])
	assert.EqualValues(t, 1, f.h.Stats().Suspicions, "the plan that finds it counts it")
	assert.Equal(t, 1, strings.Count(logs.String(), "host suspected"))
	f.plan(false)
	assert.Equal(t, 1, strings.Count(logs.String(), "host suspected"), "once per transition")
}

// TestHealthLogsEachTransitionOnce: reads (Stats, the book's verdict, the
// hedge delay) log and count nothing; a suspicion is logged and counted once
// however many plans find it, by a plan's look (judge) or by the probe an
// idempotent plan claims (claimProbe), and a re-admission once however many
// replies follow.
func TestHealthLogsEachTransitionOnce(t *testing.T) {
	var logs bytes.Buffer
	f := newHealthFixture(t, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	count := func(msg string) int { return strings.Count(logs.String(), msg) }
	f.warm(50, 2*time.Millisecond)
	require.Equal(t, f.a, f.first(false))
	f.clk.advance(200 * time.Millisecond)

	for range 3 {
		f.h.Stats()
		f.h.hedgeAfter()
		f.h.mu.Lock()
		s, _, _ := f.h.mu.book.verdict(hostKey(f.a), f.clk.now())
		f.h.mu.Unlock()
		require.Equal(t, suspectSilent, s)
	}
	assert.Zero(t, count("host suspected"), "reads log nothing")
	assert.Zero(t, f.h.Stats().Suspicions, "reads count nothing")

	for range 3 {
		assert.Equal(t, []*gocql.HostInfo{f.b, f.c, f.a}, f.plan(false))
	}
	assert.Equal(t, 1, count("host suspected"), "three plans find one suspicion")
	assert.EqualValues(t, 1, f.h.Stats().Suspicions)

	for range 3 {
		f.reply(f.a, time.Millisecond)
	}
	f.plan(false)
	assert.Equal(t, 1, count("host re-admitted"), "three replies, one re-admission")

	// Suspected again, by a timeout while B and C answer; the first plan to
	// find it is an idempotent one whose probe goes to A.
	f.clk.advance(2 * time.Second)
	f.warm(1, 2*time.Millisecond)
	f.h.observe(context.Background(), f.a, f.clk.now().Add(-time.Second), f.clk.now(), gocql.ErrTimeoutNoResponse)
	assert.Equal(t, 1, count("host suspected"), "a timeout is logged by the plan that finds it")
	assert.Equal(t, []*gocql.HostInfo{f.a, f.b, f.c}, f.plan(true), "the probe goes to A first")
	assert.Equal(t, 2, count("host suspected"), "the claimed probe finds the suspicion")
	assert.Equal(t, []*gocql.HostInfo{f.b, f.c, f.a}, f.plan(false))
	assert.Equal(t, 2, count("host suspected"), "and the next plan does not log it again")
	st := f.h.Stats()
	assert.EqualValues(t, 2, st.Suspicions)
	assert.EqualValues(t, 1, st.Probes)
	assert.Equal(t, 1, count("host re-admitted"))
}

// TestHealthAnOutstandingAttemptIsJudgedByItsOwnAge: a hand-out gocql
// never sent leaves the host's oldest hand-out behind; once it is older
// than Timeout it no longer counts, but a later attempt, really
// outstanding, must still suspect its host by its own age.
func TestHealthAnOutstandingAttemptIsJudgedByItsOwnAge(t *testing.T) {
	f := newHealthFixture(t, nil) // Timeout 5 s, threshold 100 ms
	f.warm(50, 2*time.Millisecond)
	require.Equal(t, f.a, f.first(false), "a hand-out gocql never sends")
	f.clk.advance(6 * time.Second)
	f.warm(1, 2*time.Millisecond)
	require.Equal(t, f.a, f.first(false), "6 s later: the old hand-out has expired; a real attempt to A starts")
	f.clk.advance(2 * time.Second)
	f.warm(1, 2*time.Millisecond)
	assert.Equal(t, []*gocql.HostInfo{f.b, f.c, f.a}, f.plan(false), "A's attempt is outstanding 2 s, no reply from A")
	assert.Equal(t, []string{"127.0.0.1"}, f.h.Stats().Suspected)

	// Its end observed without a reply, the attempt no longer counts by
	// its own age (the silence it ended stays measured).
	g := newHealthFixture(t, nil)
	g.warm(50, 2*time.Millisecond)
	require.Equal(t, g.a, g.first(false))
	g.clk.advance(10 * time.Millisecond)
	g.h.observe(context.Background(), g.a, g.clk.now().Add(-10*time.Millisecond), g.clk.now(), context.Canceled)
	g.clk.advance(6 * time.Second)
	g.warm(1, 2*time.Millisecond)
	assert.Equal(t, g.a, g.plan(false)[0], "an ended attempt is not outstanding")
}

// TestHealthATimeoutExplainedByASuspectedHostKeepsItsSuspicion: a lease
// session's paused A is suspected by its lone renewal timeout; a read
// coordinated by the healthy B, in flight then, times out half a second
// later (B waited for A as a replica). No host replied in between, but B's
// timeout follows A's suspicion: it is explained by A's silence and must
// not withdraw it, or the next renewal waits 4 s on A again.
func TestHealthATimeoutExplainedByASuspectedHostKeepsItsSuspicion(t *testing.T) {
	f := newHealthFixture(t, nil) // Timeout 5 s, LWTAttemptTimeout 4 s, AttemptTimeout 1 s
	for range 3 {                 // slow Paxos rounds: p99 1.4 s, threshold 14 s
		f.reply(f.b, 1400*time.Millisecond)
		f.clk.advance(3 * time.Second)
		f.reply(f.c, 1400*time.Millisecond)
		f.clk.advance(3 * time.Second)
	}
	t0 := f.clk.now()
	require.Equal(t, f.a, f.first(false), "the renewal goes to A")
	f.clk.advance(4 * time.Second)
	f.h.observe(context.Background(), f.a, t0, f.clk.now(), gocql.ErrTimeoutNoResponse)
	require.Equal(t, []*gocql.HostInfo{f.b, f.c, f.a}, f.plan(false), "A's lone timeout suspects it")

	f.clk.advance(500 * time.Millisecond)
	f.h.observe(context.Background(), f.b, t0.Add(3500*time.Millisecond), f.clk.now(), gocql.ErrTimeoutNoResponse)
	assert.Equal(t, []*gocql.HostInfo{f.b, f.c, f.a}, f.plan(false), "B's later timeout leaves A suspected")
	assert.Equal(t, []string{"127.0.0.1"}, f.h.Stats().Suspected, "and does not suspect B")

	f.clk.advance(2 * time.Second)
	assert.Equal(t, f.b, f.first(false), "the next renewal avoids A")
}

// TestHealthObserverUsesTheStoreClock: with Options.Now skewed, an attempt
// gocql times by the system clock still ends the hand-out it belongs to.
func TestHealthObserverUsesTheStoreClock(t *testing.T) {
	skewed := func() time.Time { return time.Now().Add(time.Hour) }
	o := Options{Hosts: []string{"x"}, Keyspace: "ks", Logger: slog.New(slog.DiscardHandler), Now: skewed}
	o.EnsureDefaults()
	h := newHealth(&o, o.Now)
	a := newFakeHost(1)
	next := h.order(func() gocql.SelectedHost { return fakeHost{a} }, false, nil)
	require.Equal(t, a, next().Info())
	start := time.Now()
	healthObserver{h}.ObserveQuery(context.Background(), gocql.ObservedQuery{Host: a, Start: start, End: start.Add(time.Millisecond), Err: context.Canceled})
	h.mu.Lock()
	defer h.mu.Unlock()
	assert.Empty(t, h.mu.book.host(hostKey(a)).outstanding, "the cancelled attempt is no longer outstanding")
}
