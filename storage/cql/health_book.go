package cql

import (
	"slices"
	"time"
)

// The health book: the layer of host health with no driver in it (see
// the overview in health.go). Nothing here imports gocql, takes a lock,
// reads a clock, logs or counts: every time is given by the caller.

// suspicion is why a host is suspected, or notSuspected.
type suspicion uint8

const (
	notSuspected suspicion = iota
	// suspectLoneTimeout: an attempt timed out with no other host's reply
	// or timeout to compare it with.
	suspectLoneTimeout
	// suspectTimeout: an attempt timed out while other hosts replied.
	suspectTimeout
	// suspectSilent: the host has been silent longer than the threshold.
	suspectSilent
	// suspectRefused: the host, as coordinator, refused a statement without
	// running it (unavailable, overloaded, bootstrapping), and has not
	// answered one since: its view of the cluster lacks replicas that other
	// coordinators may reach (a failure detector stuck after a partition).
	suspectRefused
)

func (s suspicion) String() string {
	switch s {
	case suspectLoneTimeout:
		return "an attempt timed out, no other host timing out with it"
	case suspectTimeout:
		return "an attempt timed out while other hosts answered"
	case suspectSilent:
		return "an attempt is outstanding with no reply since"
	case suspectRefused:
		return "as coordinator it refused a statement (unavailable, overloaded or bootstrapping) and has served none since"
	}
	return "not suspected"
}

// healthLimits are the parameters of the health rules (from Options).
type healthLimits struct {
	floor  time.Duration // SuspectFloor
	factor float64       // SuspectFactor
	// attemptTO is the window in which a reply from another host makes a
	// timeout this host's (AttemptTimeout).
	attemptTO time.Duration
	// callTO bounds every attempt (Timeout): a hand-out with neither a
	// reply nor an end observed within it was never sent (gocql asked for a
	// host it then did not use) and no longer counts as outstanding.
	callTO time.Duration
}

// maxOutstanding bounds the hand-outs with no observed end that a host's
// machine tracks; past it the oldest is forgotten, which can only shorten
// the silence measured.
const maxOutstanding = 64

// hostHealth is one host's health state machine. Its verdict at a time t:
//   - suspected by a timeout (timedOutAt set; see healthBook.timedOut for
//     when a timeout suspects its host and when it is withdrawn);
//   - else suspected when silentFor(t) exceeds the threshold.
//
// A reply (a result, or an error the server sent) clears every silence and
// timeout suspicion and every outstanding hand-out: a host that answers
// anything is alive, and an attempt still outstanding on it is its
// statement's slowness. A refusal (refused) suspects the host until it
// serves a statement (a result).
type hostHealth struct {
	// pendingSince is the oldest hand-out since the last reply; zero: none.
	pendingSince time.Time
	// outstanding are the hand-outs since the last reply whose end has not
	// been observed, oldest first.
	outstanding []time.Time
	lastReply   time.Time
	noReplyAt   time.Time // the end of the last attempt observed without a reply
	lastTimeout time.Time // the end of the last attempt that timed out
	timedOutAt  time.Time // the timeout that suspects the host; zero: none since the last reply
	// timedOutAlone: timedOutAt is a lone timeout, which a shared silence
	// may withdraw.
	timedOutAlone bool
	lastProbe     time.Time
	// refusedAt is the last refusal since the last result; zero: none.
	refusedAt time.Time
}

// handOut records that an attempt goes to the host at now.
func (m *hostHealth) handOut(now time.Time, lim healthLimits) {
	if m.pendingSince.IsZero() {
		m.pendingSince = now
	}
	// Forget hand-outs older than callTO: they were never sent.
	i := 0
	for i < len(m.outstanding) && now.Sub(m.outstanding[i]) > lim.callTO {
		i++
	}
	if len(m.outstanding)-i >= maxOutstanding {
		i++
	}
	m.outstanding = append(m.outstanding[:0], m.outstanding[i:]...)
	m.outstanding = append(m.outstanding, now)
}

// probed records that a probe was handed out at now.
func (m *hostHealth) probed(now time.Time) { m.lastProbe = now }

// ended removes the hand-out of an attempt that started at start: the
// latest hand-out at or before it.
func (m *hostHealth) ended(start time.Time) {
	for i := len(m.outstanding) - 1; i >= 0; i-- {
		if !m.outstanding[i].After(start) {
			m.outstanding = slices.Delete(m.outstanding, i, i+1)
			return
		}
	}
}

// replied records an answer that ended an attempt at end: a result
// (served), a refusal, or another error the server sent (neither).
func (m *hostHealth) replied(end time.Time, served, refusal bool) {
	m.lastReply, m.pendingSince, m.timedOutAt, m.timedOutAlone = end, time.Time{}, time.Time{}, false
	m.outstanding = m.outstanding[:0]
	switch {
	case refusal:
		m.refusedAt = end
	case served:
		m.refusedAt = time.Time{}
	}
}

// unanswered records an attempt, from start to end, that got no answer
// (cancelled, a broken connection, a timeout).
func (m *hostHealth) unanswered(start, end time.Time) {
	m.ended(start)
	m.noReplyAt = end
}

// withdraw drops a lone timeout's suspicion.
func (m *hostHealth) withdraw() { m.timedOutAt, m.timedOutAlone = time.Time{}, false }

// silentFor is how long the host has been seen silent at now, the longest of
//   - since its oldest unanswered hand-out, up to now while that hand-out
//     may still be in flight (callTO bounds every attempt), else up to the
//     last attempt that ended unanswered: a host whose attempts are all
//     overtaken (cancelled when a hedge wins) stays silent;
//   - the age of its oldest attempt still outstanding (handed out, no end
//     observed, not older than callTO): each outstanding attempt is judged
//     by its own age, however old a forgotten hand-out before it.
func (m *hostHealth) silentFor(now time.Time, lim healthLimits) time.Duration {
	var d time.Duration
	switch {
	case m.pendingSince.IsZero():
	case now.Sub(m.pendingSince) <= lim.callTO:
		d = now.Sub(m.pendingSince)
	case m.noReplyAt.After(m.pendingSince):
		d = m.noReplyAt.Sub(m.pendingSince)
	}
	for _, t := range m.outstanding {
		if now.Sub(t) <= lim.callTO {
			d = max(d, now.Sub(t))
			break
		}
	}
	return d
}

// verdict is the host's state at now against threshold, and how long it
// has been silent.
func (m *hostHealth) verdict(now time.Time, lim healthLimits, threshold time.Duration) (suspicion, time.Duration) {
	silent := m.silentFor(now, lim)
	switch {
	case !m.timedOutAt.IsZero() && m.timedOutAlone:
		return suspectLoneTimeout, silent
	case !m.timedOutAt.IsZero():
		return suspectTimeout, silent
	case silent > threshold:
		return suspectSilent, silent
	case !m.refusedAt.IsZero():
		return suspectRefused, silent
	}
	return notSuspected, silent
}

// healthBook is every host's hostHealth, by host key, and the facts the
// rules compare a host against. Hosts are suspected when
//   - they have been silent (hostHealth.silentFor) longer than the
//     threshold, max(SuspectFloor, SuspectFactor x the p99 of recent
//     healthy replies); or
//   - an attempt to them got no answer within its attempt timeout (see
//     timedOut).
//
// healthBook is not safe for concurrent use.
type healthBook struct {
	lim       healthLimits
	hosts     map[string]*hostHealth
	lastReply time.Time // the last reply from any host
	lat       latencyWindow
}

func newHealthBook(lim healthLimits) healthBook {
	return healthBook{lim: lim, hosts: map[string]*hostHealth{}}
}

// host returns the machine of key, created on first use.
func (b *healthBook) host(key string) *hostHealth {
	m := b.hosts[key]
	if m == nil {
		m = &hostHealth{}
		b.hosts[key] = m
	}
	return m
}

// handOut records that an attempt goes to key at now.
func (b *healthBook) handOut(key string, now time.Time) { b.host(key).handOut(now, b.lim) }

// probed records that a probe goes to key at now.
func (b *healthBook) probed(key string, now time.Time) { b.host(key).probed(now) }

// replied records an answer from key to an attempt from start to end;
// healthy (a result, not a server error) adds its latency to the window;
// refusal: the server refused the statement without running it.
func (b *healthBook) replied(key string, start, end time.Time, healthy, refusal bool) {
	if healthy {
		b.lat.add(end, end.Sub(start))
	}
	b.host(key).replied(end, healthy, refusal)
	if end.After(b.lastReply) {
		b.lastReply = end
	}
}

// unanswered records an attempt to key that ended at end with no answer
// and no timeout (cancelled, a broken connection).
func (b *healthBook) unanswered(key string, start, end time.Time) {
	b.host(key).unanswered(start, end)
}

// timedOut records that an attempt to key, in flight from start to end,
// got no answer within its attempt timeout, and returns the keys of the
// hosts whose lone timeouts it withdraws.
//
// Its window is the attempt, or the last attempt timeout before end if the
// attempt was shorter.
//   - Another host replied in the window (and after key's last reply): the
//     silence is key's, which is suspected.
//   - No host replied, and no other host timed out in the window either:
//     key's is a lone timeout, which suspects it (a session that only
//     renews a lease has nothing to compare with, and a slow Paxos round
//     elsewhere must not raise the threshold above the attempt timeout it
//     is measured against).
//   - No host replied and other hosts timed out in the window too: a shared
//     silence, the client's or the network's. It suspects nobody, and it
//     withdraws the lone timeouts of those hosts that came at the same time
//     as this one (at most SuspectFloor before end). A lone timeout that
//     came earlier stands: its host was suspected first, and this timeout
//     is explained by that host's silence (this host, a coordinator, waited
//     for it as a replica); this host replied to other statements before
//     and will again, while the earlier host stays suspected until it
//     replies. A stalled client's timers fire together when it resumes,
//     so its shared silence still withdraws them all; a network that goes
//     silent for the client leaves the first host to time out suspected
//     until it replies (a probe, or a plan that reaches it).
func (b *healthBook) timedOut(key string, start, end time.Time) []string {
	m := b.host(key)
	m.unanswered(start, end)
	m.lastTimeout = end
	since := end.Add(-b.lim.attemptTO)
	if start.Before(since) {
		since = start
	}
	if b.lastReply.After(since) && b.lastReply.After(m.lastReply) {
		m.timedOutAt, m.timedOutAlone = end, false
		return nil
	}
	shared, withdrawn := false, []string(nil)
	for k, o := range b.hosts {
		if o == m || !o.lastTimeout.After(since) || !o.lastReply.Before(o.lastTimeout) {
			continue
		}
		shared = true
		if o.timedOutAlone && !o.timedOutAt.Before(end.Add(-b.lim.floor)) {
			o.withdraw()
			withdrawn = append(withdrawn, k)
		}
	}
	if !shared {
		m.timedOutAt, m.timedOutAlone = end, true
	}
	return withdrawn
}

// threshold is how long a host may be silent before it is suspected.
func (b *healthBook) threshold(now time.Time) time.Duration {
	p99 := b.lat.p99(now)
	return max(b.lim.floor, time.Duration(float64(p99)*b.lim.factor))
}

// verdict is key's state at now, how long it has been silent, and the
// threshold it was judged against.
func (b *healthBook) verdict(key string, now time.Time) (suspicion, time.Duration, time.Duration) {
	th := b.threshold(now)
	m := b.hosts[key]
	if m == nil {
		return notSuspected, 0, th
	}
	s, silent := m.verdict(now, b.lim, th)
	return s, silent, th
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
