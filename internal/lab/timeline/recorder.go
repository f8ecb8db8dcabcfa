package timeline

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cqlseq/cqlseq/internal/latency"
)

// DefaultInterval is the interval of Options.Interval 0.
const DefaultInterval = time.Second

// MaxIntervals bounds a Recorder's intervals: an event later than
// MaxIntervals intervals after the start counts in the last of them.
const MaxIntervals = 1 << 22

// Options configure a Recorder.
type Options struct {
	// Start is when interval 0 begins; zero: the time New is called.
	Start time.Time
	// Interval is the length of an interval; 0: DefaultInterval.
	Interval time.Duration
	// Title says what is recorded (one line); it is carried into the
	// Timeline.
	Title string
}

// EnsureDefaults sets the zero fields to their defaults.
func (o *Options) EnsureDefaults() {
	if o.Start.IsZero() {
		o.Start = time.Now()
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
}

// Validate reports every problem at once.
func (o *Options) Validate() error {
	var errs []error
	if o.Interval <= 0 {
		errs = append(errs, fmt.Errorf("timeline: interval %v: want > 0", o.Interval))
	}
	if strings.ContainsAny(o.Title, "\r\n") {
		errs = append(errs, fmt.Errorf("timeline: title %q: one line, please", o.Title))
	}
	return errors.Join(errs...)
}

// Recorder collects the events of many goroutines, each through its own
// Shard, per interval. Its Timeline is read once every Shard is flushed.
type Recorder struct {
	start    time.Time
	interval time.Duration
	title    string

	mu struct {
		sync.Mutex
		slots []slot // the flushed counts, per interval
	}
}

// slot is one interval's counts.
type slot struct {
	acked, busy, failed uint64
	lat                 latency.Histogram
}

// New returns a Recorder with o's settings (defaults for its zero fields).
func New(o Options) (*Recorder, error) {
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	return &Recorder{start: o.Start, interval: o.Interval, title: o.Title}, nil
}

// Start returns when interval 0 begins.
func (r *Recorder) Start() time.Time { return r.start }

// index returns the interval at belongs to: 0 before the start, at most
// MaxIntervals-1.
func (r *Recorder) index(at time.Time) int {
	d := at.Sub(r.start)
	if d < 0 {
		return 0
	}
	return int(min(d/r.interval, MaxIntervals-1))
}

// add merges one shard's counts of interval i.
func (r *Recorder) add(i int, acked, busy, failed uint64, lat *latency.Histogram) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for len(r.mu.slots) <= i {
		r.mu.slots = append(r.mu.slots, slot{})
	}
	s := &r.mu.slots[i]
	s.acked += acked
	s.busy += busy
	s.failed += failed
	s.lat.Merge(lat)
}

// Timeline returns what the flushed Shards recorded, from the start to end
// (or to the last recorded interval, if later): every interval in between
// is present, those without events with zeros; the last is cut at end.
// Events still unflushed in a Shard are not in it.
func (r *Recorder) Timeline(end time.Time) *Timeline {
	r.mu.Lock()
	defer r.mu.Unlock()
	span := max(end.Sub(r.start), 0)
	n := int(min((span+r.interval-1)/r.interval, MaxIntervals))
	n = max(n, len(r.mu.slots))
	t := &Timeline{Title: r.title, Start: r.start.Round(0).UTC(), Interval: r.interval, Intervals: make([]Interval, n)}
	for i := range t.Intervals {
		iv := &t.Intervals[i]
		iv.Start = time.Duration(i) * r.interval
		iv.Length = r.interval
		if i == n-1 && span > iv.Start && span < iv.Start+r.interval {
			iv.Length = span - iv.Start // end falls in it
		}
		if i < len(r.mu.slots) {
			s := &r.mu.slots[i]
			iv.Acked, iv.Busy, iv.Failed = s.acked, s.busy, s.failed
			iv.P50, iv.P99, iv.Max = s.lat.Quantile(0.50), s.lat.Quantile(0.99), s.lat.Max()
		}
	}
	return t
}

// Shard records one goroutine's events into a Recorder. It is not safe for
// concurrent use: each goroutine has its own. It holds the events of one
// interval and hands them to the Recorder when an event of another
// interval comes, and on Flush, so recording allocates nothing but, rarely,
// latency buckets and takes no lock but once per interval. A nil *Shard
// records nothing.
type Shard struct {
	r                   *Recorder
	cur                 int // the interval of the held counts
	acked, busy, failed uint64
	lat                 latency.Histogram
	held                bool // anything to hand over
}

// NewShard returns a Shard of r for one goroutine.
func (r *Recorder) NewShard() *Shard { return &Shard{r: r} }

// to makes at's interval the current one, handing the held counts over
// when it changes.
func (s *Shard) to(at time.Time) {
	i := s.r.index(at)
	if i != s.cur {
		s.Flush()
		s.cur = i
	}
	s.held = true
}

// Ack records a command acknowledged at at, lat after it began.
func (s *Shard) Ack(at time.Time, lat time.Duration) {
	if s == nil {
		return
	}
	s.to(at)
	s.acked++
	s.lat.Record(lat)
}

// Busy records a busy answer at at.
func (s *Shard) Busy(at time.Time) {
	if s == nil {
		return
	}
	s.to(at)
	s.busy++
}

// Fail records a command that failed at at.
func (s *Shard) Fail(at time.Time) {
	if s == nil {
		return
	}
	s.to(at)
	s.failed++
}

// Flush hands the held counts to the Recorder. Call it when the goroutine
// is done, before the Recorder's Timeline is read.
func (s *Shard) Flush() {
	if s == nil || !s.held {
		return
	}
	s.r.add(s.cur, s.acked, s.busy, s.failed, &s.lat)
	s.acked, s.busy, s.failed = 0, 0, 0
	s.lat.Reset()
	s.held = false
}
