package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/internal/lab/timeline"
	"github.com/cqlseq/cqlseq/internal/latency"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/metrics"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/vvmadapter"
)

// The simulated command processor: one workspace kind with two sequences.
// Every command takes one record ID (written as a record row) and one WLog
// offset, so its event carries two numbers and one record.
const (
	wsKind     isequencer.WSKind = 1
	seqRecords isequencer.SeqID  = 1
	seqWLog    isequencer.SeqID  = 2
)

var commandSeqs = []isequencer.SeqID{seqRecords, seqWLog}

func seqTypes() map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number {
	return map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number{wsKind: {seqRecords: 1, seqWLog: 1}}
}

// maxPartitions bounds --partitions; PLog partitions from
// baselinePartitionBase up are the baseline's.
const (
	maxPartitions         = 4096
	baselinePartitionBase = 0xF000
)

// busyBackoff is how long a load worker waits after ErrBusy.
const busyBackoff = 200 * time.Microsecond

// workspaceOf returns the i-th workspace of partition p: workspaces
// 1..n are spread over the partitions round-robin (WSID w belongs to
// partition (w-1) mod parts).
func workspaceOf(p, parts, i int) isequencer.WSID { return isequencer.WSID(p + 1 + parts*i) }

// workspacesIn returns how many of workspaces 1..n partition p holds.
func workspacesIn(p, parts, n int) int { return (n - p + parts - 1) / parts }

// openConfig configures openPartitions.
type openConfig struct {
	st           storage.Storage
	app          isequencer.ClusterAppID
	partitions   int
	mode         plog.Mode
	mc           *metrics.Collectors
	log          *slog.Logger
	maxUnflushed int
	flushAfter   int
	maxGroup     int
	batcherDelay time.Duration
	readyTimeout time.Duration
}

// partitionSet is the opened partitions 0..n-1 of one application.
type partitionSet struct {
	parts []*apppart.Partition
	obs   []*observer
}

// openStats describe the first actualization of a set of partitions.
type openStats struct {
	wall    time.Duration // from the first Open until every partition had actualized
	events  int           // PLog events replayed, all partitions
	maxTook time.Duration // the slowest partition's actualization, as its sequencer measured it
}

// openPartitions claims c.partitions as the application's partition count
// (vvmadapter.ClaimPartitionCount), then opens partitions
// 0..c.partitions-1 and waits until each has actualized (its first Do
// would not be refused as busy). workspaceOf's mapping depends on the
// count, and a workspace moved to another partition would be given
// numbers it already had, so a store whose application ran with another
// count is refused. The claim and each partition's Open are retried on a
// transient error (retryTransient) until c.readyTimeout after their first
// attempt. On an error the partitions opened are closed.
func openPartitions(ctx context.Context, c openConfig) (*partitionSet, openStats, error) {
	began := time.Now()
	err := retryTransient(ctx, c.log, "claiming the partition count", c.readyTimeout, func(ctx context.Context) error {
		return vvmadapter.New(c.st, c.app).ClaimPartitionCount(ctx, uint64(c.partitions))
	})
	if err != nil {
		if errors.Is(err, vvmadapter.ErrPartitionCountChanged) {
			return nil, openStats{}, fmt.Errorf("%w: workspaces are spread over the partitions by WSID, and a workspace moved to another partition would be given numbers it already had (docs/design.md, Partitions): use the same --partitions, or another store", err)
		}
		return nil, openStats{}, err
	}
	s := &partitionSet{}
	for p := range c.partitions {
		pm := c.mc.Partition(c.app, isequencer.PartitionID(p))
		obs := newObserver(pm)
		var part *apppart.Partition
		err := retryTransient(ctx, c.log, fmt.Sprintf("opening partition %d", p), c.readyTimeout, func(ctx context.Context) (err error) {
			part, err = apppart.Open(ctx, apppart.OpenOptions{
				Storage:        c.st,
				App:            c.app,
				Partition:      isequencer.PartitionID(p),
				Mode:           c.mode,
				SeqTypes:       seqTypes(),
				RecordSeqs:     []isequencer.SeqID{seqRecords},
				WLogOffsetSeq:  seqWLog,
				MaxGroupEvents: c.maxGroup,
				Sequencer: isequencer.Params{
					MaxNumUnflushedValues: c.maxUnflushed,
					FlushAfterEvents:      c.flushAfter,
					BatcherDelay:          c.batcherDelay,
					Logger:                c.log,
					Metrics:               obs,
				},
				Logger:  c.log,
				Metrics: pm,
			})
			return err
		})
		if err != nil {
			return nil, openStats{}, errors.Join(err, s.close())
		}
		s.parts = append(s.parts, part)
		s.obs = append(s.obs, obs)
	}
	var st openStats
	for p, obs := range s.obs {
		events, took, err := obs.waitReady(ctx, c.readyTimeout)
		if err != nil {
			return nil, openStats{}, errors.Join(fmt.Errorf("partition %d: %w", p, err), s.close())
		}
		st.events += events
		st.maxTook = max(st.maxTook, took)
	}
	st.wall = time.Since(began)
	return s, st, nil
}

// Backoff between attempts of retryTransient.
const (
	retryFirstWait = 100 * time.Millisecond
	retryMaxWait   = 2 * time.Second
)

// retryTransient calls do until it succeeds or fails with an error that
// wraps neither storage.ErrUnavailable nor storage.ErrUnknownOutcome (a
// partition of the cluster not ready yet: a node rejoining, a Paxos round
// that timed out). It waits retryFirstWait, doubling up to retryMaxWait,
// between attempts and logs each retry (warning); once limit has passed
// since the first attempt, or ctx is done, it returns the last error.
// Other errors are returned at once.
func retryTransient(ctx context.Context, log *slog.Logger, what string, limit time.Duration, do func(context.Context) error) error {
	deadline := time.Now().Add(limit)
	wait := retryFirstWait
	for attempt := 1; ; attempt++ {
		err := do(ctx)
		if err == nil || !(errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrUnknownOutcome)) {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return fmt.Errorf("%s: gave up after %d attempts in %v: %w", what, attempt, limit, err)
		}
		wait = min(wait, left)
		log.Warn("cqlseq: "+what+" failed, retrying", "attempt", attempt, "in", wait, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (after %d attempts: %w)", what, ctx.Err(), attempt, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, retryMaxWait)
	}
}

// close closes every partition ("kills" it: values not yet flushed are
// dropped and recovered from the PLog by the next open). A nil set and a
// second close are no-ops.
func (s *partitionSet) close() error {
	if s == nil {
		return nil
	}
	var errs []error
	for _, p := range s.parts {
		errs = append(errs, p.Close())
	}
	s.parts = nil
	return errors.Join(errs...)
}

// flushStats sums the partitions' flush counters.
func (s *partitionSet) flushStats() (flushes, values, maxBatch uint64) {
	for _, o := range s.obs {
		flushes += o.flushes.Load()
		values += o.flushedValues.Load()
		maxBatch = max(maxBatch, o.maxBatch.Load())
	}
	return flushes, values, maxBatch
}

// busyByReason sums the partitions' busy counters by reason.
func (s *partitionSet) busyByReason() (actualizing, unflushed uint64) {
	for _, o := range s.obs {
		actualizing += o.busyActualizing.Load()
		unflushed += o.busyUnflushed.Load()
	}
	return actualizing, unflushed
}

// loadConfig configures a load run.
type loadConfig struct {
	partitions  int
	workspaces  int
	concurrency int           // workers per partition, each running one command at a time
	duration    time.Duration // how long commands are started
	payload     []byte        // read-only, shared by every command
	seed        uint64
	count       *atomic.Uint64 // if set, counts completed commands (progress)
	killed      *atomic.Bool   // if set and true, the store was cut off: workers stop
	// ack, if set, records a command that succeeded before it is counted;
	// an error stops the worker (reported as stopped).
	ack func(p isequencer.PartitionID, ws isequencer.WSID, res apppart.Result) error
	// timeline, if set, records each command's outcome per interval: every
	// worker records into a Shard of it (runCommands only).
	timeline *timeline.Recorder
}

// loadResult is what a load run did.
type loadResult struct {
	commands uint64 // completed
	numbers  uint64 // numbers the completed commands took
	busy     uint64 // ErrBusy refusals (each retried)
	errors   uint64 // other failures
	killed   uint64 // failures after loadConfig.killed was set
	firstErr error
	stopped  error // a partition stopped after a conflict
	elapsed  time.Duration
	lat      *latency.Histogram // latency of completed commands
	shard    *timeline.Shard    // a worker's: its share of loadConfig.timeline (nil: none)

	lastOffset  isequencer.PLogOffset   // a worker's: the largest offset of its partition it wrote
	lastOffsets []isequencer.PLogOffset // the total's: per partition
}

// events returns the sum of lastOffsets: the partitions' log lengths when
// the log is complete up to each last offset.
func (r *loadResult) events() uint64 {
	var n uint64
	for _, o := range r.lastOffsets {
		n += uint64(o)
	}
	return n
}

func (r *loadResult) perSecond() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.commands) / r.elapsed.Seconds()
}

func (r *loadResult) merge(o *loadResult) {
	r.commands += o.commands
	r.numbers += o.numbers
	r.busy += o.busy
	r.errors += o.errors
	r.killed += o.killed
	if r.firstErr == nil {
		r.firstErr = o.firstErr
	}
	if r.stopped == nil {
		r.stopped = o.stopped
	}
	r.lat.Merge(o.lat)
}

// runWorkers runs concurrency workers per partition until c.duration has
// passed or ctx is done, and waits for all of them. A worker starts no
// command after the deadline; commands in flight then complete (ctx is
// passed to them: cancelling it cancels them).
func runWorkers(ctx context.Context, c loadConfig, work func(ctx context.Context, p int, rng *rand.Rand, deadline time.Time, r *loadResult)) loadResult {
	began := time.Now()
	deadline := began.Add(c.duration)
	results := make([]loadResult, c.partitions*c.concurrency)
	var wg sync.WaitGroup
	for p := range c.partitions {
		for w := range c.concurrency {
			i := p*c.concurrency + w
			results[i].lat = latency.New()
			if c.timeline != nil {
				results[i].shard = c.timeline.NewShard()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer results[i].shard.Flush()
				rng := rand.New(rand.NewPCG(c.seed, uint64(i)))
				work(ctx, p, rng, deadline, &results[i])
			}()
		}
	}
	wg.Wait()
	total := loadResult{lat: latency.New(), elapsed: time.Since(began), lastOffsets: make([]isequencer.PLogOffset, c.partitions)}
	for i := range results {
		total.merge(&results[i])
		p := i / c.concurrency
		total.lastOffsets[p] = max(total.lastOffsets[p], results[i].lastOffset)
	}
	return total
}

// refusedErr reports an error no retry can cure: the store refused the
// credentials, a permission or the TLS handshake.
func refusedErr(err error) bool {
	return errors.Is(err, storage.ErrAuthorization) || errors.Is(err, storage.ErrAuthentication) || errors.Is(err, storage.ErrTLS)
}

// runCommands drives the partitions with commands: each picks a random
// workspace of its partition and takes commandSeqs. A refused command
// (refusedErr: no permission, bad credentials, TLS) stops every worker at
// once, reported as stopped. With c.timeline, each command's outcome is
// recorded when it is known: acknowledged (exactly the commands counted),
// busy, or failed (every error but a cancellation at the end of the run,
// including an ack log that could not record it).
func runCommands(ctx context.Context, parts []*apppart.Partition, c loadConfig) loadResult {
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	return runWorkers(ctx, c, func(ctx context.Context, p int, rng *rand.Rand, deadline time.Time, r *loadResult) {
		part := parts[p]
		n := workspacesIn(p, c.partitions, c.workspaces)
		cmd := apppart.Command{WSKind: wsKind, Seqs: commandSeqs, Payload: c.payload}
		for ctx.Err() == nil {
			began := time.Now()
			if !began.Before(deadline) || c.killed != nil && c.killed.Load() {
				return
			}
			cmd.WSID = workspaceOf(p, c.partitions, rng.IntN(n))
			res, err := part.Do(ctx, cmd)
			switch {
			case err == nil:
				if c.ack != nil {
					if err := c.ack(isequencer.PartitionID(p), cmd.WSID, res); err != nil {
						r.stopped = err
						r.shard.Fail(time.Now())
						return
					}
				}
				now := time.Now()
				lat := now.Sub(began)
				r.lat.Record(lat)
				r.shard.Ack(now, lat)
				r.commands++
				r.numbers += uint64(len(res.Numbers))
				r.lastOffset = max(r.lastOffset, res.Offset)
				if c.count != nil {
					c.count.Add(1)
				}
			case errors.Is(err, apppart.ErrBusy):
				r.busy++
				r.shard.Busy(time.Now())
				time.Sleep(busyBackoff)
			case ctx.Err() != nil, errors.Is(err, apppart.ErrClosed):
				return
			case c.killed != nil && c.killed.Load():
				r.killed++
				r.shard.Fail(time.Now())
				return
			case errors.Is(err, apppart.ErrStopped):
				r.stopped = fmt.Errorf("partition %d: %w", p, err)
				r.shard.Fail(time.Now())
				return
			case refusedErr(err):
				r.errors++
				r.stopped = fmt.Errorf("partition %d: %w", p, err)
				r.shard.Fail(time.Now())
				abort(r.stopped)
				return
			default:
				r.errors++
				r.shard.Fail(time.Now())
				if r.firstErr == nil {
					r.firstErr = fmt.Errorf("partition %d: %w", p, err)
				}
			}
		}
	})
}

// baselineBase returns the first offset of a baseline run: the start time
// in Unix microseconds shifted left by 12 (one storage partition of 4,096
// offsets per microsecond), so that runs on one store never write the same
// keys (trust levels 0 and 1 would report a conflict) unless one writes
// more than 4,096 events per microsecond between their starts.
func baselineBase(now time.Time) isequencer.PLogOffset {
	return isequencer.PLogOffset(uint64(now.UnixMicro()) << 12)
}

// baselineWriter returns the raw PLog write of one event to partition part
// in mode: plog.Writer's Write in the trust modes; in the fenced mode one
// conditional batch per event (a group of one) under a fence of a fresh
// epoch (time-based, so later runs on one store fence off earlier ones),
// swept from base before it returns (plog.Sweep) and serialised per
// partition as the fenced writer is.
func baselineWriter(ctx context.Context, st storage.Storage, part isequencer.PartitionID, mode plog.Mode, base isequencer.PLogOffset) (func(context.Context, *plog.Event) error, error) {
	if mode != plog.ModeFenced {
		w, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: part, Mode: mode})
		if err != nil {
			return nil, err
		}
		return w.Write, nil
	}
	epoch := uint64(time.Now().UnixMicro())
	if _, err := plog.Sweep(ctx, st, part, base, epoch); err != nil {
		return nil, err
	}
	fw, err := plog.NewFencedWriter(plog.FencedWriterOptions{Storage: st, Partition: part, Epoch: epoch})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	return func(ctx context.Context, e *plog.Event) error {
		mu.Lock()
		defer mu.Unlock()
		return fw.WriteGroup(ctx, []*plog.Event{e})
	}, nil
}

// runBaseline runs c's workers writing events in mode with baselineWriter
// alone (no sequencer): the event shape of runCommands, to PLog partitions
// baselinePartitionBase+p, at consecutive offsets after base (an event's
// numbers and record ID are its offset). A worker starts no write after
// c.duration and stops at ctx's end or at a conflict (reported as
// stopped); other write errors are counted. It returns an error only when
// a partition's writer cannot be made.
func runBaseline(ctx context.Context, st storage.Storage, mode plog.Mode, base isequencer.PLogOffset, c loadConfig) (loadResult, error) {
	writers := make([]func(context.Context, *plog.Event) error, c.partitions)
	next := make([]atomic.Uint64, c.partitions)
	for p := range writers {
		part := isequencer.PartitionID(baselinePartitionBase + p)
		w, err := baselineWriter(ctx, st, part, mode, base)
		if err != nil {
			return loadResult{}, fmt.Errorf("baseline: %w", err)
		}
		writers[p] = w
		next[p].Store(uint64(base))
	}
	return runWorkers(ctx, c, func(ctx context.Context, p int, rng *rand.Rand, deadline time.Time, r *loadResult) {
		n := workspacesIn(p, c.partitions, c.workspaces)
		e := plog.Event{WSKind: wsKind, Payload: c.payload, Numbers: make([]plog.SeqNumber, 2), Records: make([]plog.RecordID, 1)}
		for ctx.Err() == nil {
			began := time.Now()
			if !began.Before(deadline) {
				return
			}
			off := next[p].Add(1)
			e.Offset = isequencer.PLogOffset(off)
			e.WSID = workspaceOf(p, c.partitions, rng.IntN(n))
			e.WLogOffset = off
			e.Numbers[0] = plog.SeqNumber{SeqID: seqRecords, Number: isequencer.Number(off)}
			e.Numbers[1] = plog.SeqNumber{SeqID: seqWLog, Number: isequencer.Number(off)}
			e.Records[0] = plog.RecordID(off)
			err := writers[p](ctx, &e)
			switch {
			case err == nil:
				r.lat.Record(time.Since(began))
				r.commands++
				r.numbers += 2
				r.lastOffset = max(r.lastOffset, e.Offset)
				if c.count != nil {
					c.count.Add(1)
				}
			case ctx.Err() != nil:
				return
			case errors.Is(err, plog.ErrConflict):
				r.stopped = fmt.Errorf("baseline partition %d: %w", baselinePartitionBase+p, err)
				return
			default:
				r.errors++
				if r.firstErr == nil {
					r.firstErr = fmt.Errorf("baseline partition %d: %w", baselinePartitionBase+p, err)
				}
			}
		}
	}), nil
}
