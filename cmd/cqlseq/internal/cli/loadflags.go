package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/metrics"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
)

// maxPayload bounds --payload.
const maxPayload = 1 << 20

// loadFlags configure the simulated command processor of demo and bench.
type loadFlags struct {
	app          uint32
	partitions   int
	workspaces   int
	duration     time.Duration
	concurrency  int
	mode         string
	payload      int
	maxUnflushed int
	flushAfter   int
	maxGroup     int
	batcherDelay time.Duration
	readyTimeout time.Duration
	seed         uint64
	metricsAddr  string

	parsedMode plog.Mode // set by validate
}

func (f *loadFlags) add(fs *pflag.FlagSet, duration time.Duration) {
	fs.Uint32Var(&f.app, "app", 1, "cluster application ID (PLog keys carry none: one keyspace or file per application)")
	fs.IntVar(&f.partitions, "partitions", 4, "application partitions (0..n-1), at most 4096")
	fs.IntVar(&f.workspaces, "workspaces", 5000, "workspaces (1..n, spread over the partitions)")
	fs.DurationVar(&f.duration, "duration", duration, "how long commands are started")
	fs.IntVar(&f.concurrency, "concurrency", 1, "clients per partition, each running one command at a time (a partition writes its clients' events in groups)")
	fs.StringVar(&f.mode, "mode", "trust0", "event log write mode (the sequences trust level): trust0, trust1, trust2 or fenced (README, Modes)")
	fs.IntVar(&f.payload, "payload", 64, "payload bytes per event")
	fs.IntVar(&f.maxUnflushed, "max-unflushed", isequencer.DefaultMaxNumUnflushedValues, "values waiting to be flushed above which a partition is busy")
	fs.IntVar(&f.flushAfter, "flush-after-events", apppart.DefaultFlushAfterEvents, "durable events past the stored next offset after which a partition stores its numbers (sooner at a quarter of --max-unflushed; 1: after every group): at most about that many events for a restart to replay")
	fs.IntVar(&f.maxGroup, "max-group-events", apppart.DefaultMaxGroupEvents, "events of the commands in flight written in one group write, at most (1: each alone, to compare with)")
	fs.DurationVar(&f.batcherDelay, "batcher-delay", 0, "how long the flusher waits to collect a bigger batch")
	fs.DurationVar(&f.readyTimeout, "ready-timeout", time.Minute, "how long a partition may take to actualize when opened")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the workspace choice")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics while running (e.g. 127.0.0.1:9100)")
}

// validate reports every problem at once and parses the mode.
func (f *loadFlags) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if f.partitions < 1 || f.partitions > maxPartitions {
		bad("--partitions %d: want 1..%d", f.partitions, maxPartitions)
	}
	if f.workspaces < 1 {
		bad("--workspaces %d: want >= 1", f.workspaces)
	} else if f.partitions >= 1 && f.workspaces < f.partitions {
		bad("--workspaces %d: want at least one per partition (%d)", f.workspaces, f.partitions)
	}
	if f.duration <= 0 {
		bad("--duration %v: want > 0", f.duration)
	}
	if f.concurrency < 1 {
		bad("--concurrency %d: want >= 1", f.concurrency)
	}
	if f.payload < 0 || f.payload > maxPayload {
		bad("--payload %d: want 0..%d", f.payload, maxPayload)
	}
	if f.maxUnflushed < 1 || f.maxUnflushed > isequencer.MaxMaxNumUnflushedValues {
		bad("--max-unflushed %d: want 1..%d", f.maxUnflushed, isequencer.MaxMaxNumUnflushedValues)
	}
	if f.flushAfter < 1 || f.flushAfter > isequencer.MaxFlushAfterEvents {
		bad("--flush-after-events %d: want 1..%d", f.flushAfter, isequencer.MaxFlushAfterEvents)
	}
	if f.maxGroup < 1 {
		bad("--max-group-events %d: want >= 1", f.maxGroup)
	}
	if f.batcherDelay < 0 {
		bad("--batcher-delay %v: want >= 0", f.batcherDelay)
	}
	if f.readyTimeout <= 0 {
		bad("--ready-timeout %v: want > 0", f.readyTimeout)
	}
	m, err := plog.ParseMode(f.mode)
	if err != nil {
		bad("--mode: %v", err)
	}
	f.parsedMode = m
	return errors.Join(errs...)
}

func (f *loadFlags) loadConfig(d time.Duration) loadConfig {
	return loadConfig{
		partitions:  f.partitions,
		workspaces:  f.workspaces,
		concurrency: f.concurrency,
		duration:    d,
		payload:     make([]byte, f.payload),
		seed:        f.seed,
	}
}

// instruments are a run's metrics: the collectors on their own registry
// and, with --metrics-addr, the server that exposes them.
type instruments struct {
	mc  *metrics.Collectors
	srv *metricsServer
}

func (e *env) startInstruments(addr string) (*instruments, error) {
	mc, err := metrics.New(prometheus.NewRegistry())
	if err != nil {
		return nil, err
	}
	in := &instruments{mc: mc}
	if addr != "" {
		if in.srv, err = startMetricsServer(addr, mc.Handler()); err != nil {
			return nil, err
		}
		fmt.Fprintf(e.stderr, "metrics: http://%s/metrics\n", in.srv.addr)
	}
	return in, nil
}

func (in *instruments) stop() error {
	if in.srv == nil {
		return nil
	}
	return in.srv.stop()
}

// openConfig returns the partitions' configuration over st.
func (f *loadFlags) openConfig(e *env, in *instruments, st storage.Storage) openConfig {
	return openConfig{
		st:           st,
		app:          isequencer.ClusterAppID(f.app),
		partitions:   f.partitions,
		mode:         f.parsedMode,
		mc:           in.mc,
		log:          e.log,
		maxUnflushed: f.maxUnflushed,
		flushAfter:   f.flushAfter,
		maxGroup:     f.maxGroup,
		batcherDelay: f.batcherDelay,
		readyTimeout: f.readyTimeout,
	}
}
