package ops

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/metrics"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage/faulty"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// lagSampleEvery is the real time between two samples of a lag run; each
// sample stands for one minute of the promtool test the run writes.
const lagSampleEvery = 60 * time.Millisecond

// TestLagAlertsOnARunningPartition is issue 50's lag alerts on a real
// partition: apppart in trust0 over the mem store, through storage/faulty
// and the metrics wrapper, under a load of commands. The run samples the
// partition's metrics (one sample a simulated minute), and has four
// stretches: healthy; flushes stalled by a storage fault (every PutBatch,
// the sequencer's flush, delayed: the unflushed values pile up); the fault
// removed (they drain); the event writes hung (every conditional write
// times out: no event becomes durable while commands arrive); the fault
// removed. It writes the samples as a promtool test of the real rules,
// asserting that CqlseqFlushLagging fires in the second stretch and not in
// the first or the third, and CqlseqDurableOffsetStalled fires in the
// fourth and not in the third or the fifth, and runs promtool on it.
func TestLagAlertsOnARunningPartition(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian: prometheus; CI installs it)")
	}
	if testing.Short() {
		t.Skip("a run of several seconds")
	}
	reg := prometheus.NewRegistry()
	c, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	fst, err := faulty.New(mem.New(mem.Options{}), faulty.Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer fst.Close()
	m := c.Partition(1, 0)
	const limit = 300
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := apppart.Open(ctx, apppart.OpenOptions{
		Storage: c.Storage(fst), App: 1, Partition: 0, Mode: plog.ModeTrust0,
		SeqTypes:  map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number{1: {1: 1}},
		Sequencer: isequencer.Params{MaxNumUnflushedValues: limit, Metrics: m, RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 50 * time.Millisecond},
		Metrics:   m, StorageTimeout: 2 * time.Second, WriteTimeout: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(i), 1))
			for ctx.Err() == nil {
				cctx, ccancel := context.WithTimeout(ctx, 100*time.Millisecond)
				_, err := p.Do(cctx, apppart.Command{WSKind: 1, WSID: isequencer.WSID(1 + r.IntN(5000)), Seqs: []isequencer.SeqID{1}})
				ccancel()
				if err != nil {
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()

	run := &lagRun{reg: reg}
	share := func(s lagSample) float64 { return s.unflushed / s.limit }
	// 1. healthy
	run.sampleN(t, 8)
	healthyEnd := run.last()
	// 2. flushes stalled: each flush waits 400 ms.
	if err := fst.SetRules(faulty.Rule{Ops: []string{faulty.OpPutBatch}, Action: faulty.Delay, Delay: 400 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	run.sampleUntil(t, "the unflushed values to stay above half the limit", 400, func(s []lagSample) bool {
		return tail(s, 6, func(x lagSample) bool { return share(x) > 0.5 })
	})
	lagging := run.last()
	// 3. the fault removed: the flushes drain.
	if err := fst.SetRules(); err != nil {
		t.Fatal(err)
	}
	run.sampleUntil(t, "the unflushed values to drain", 400, func(s []lagSample) bool {
		return tail(s, 8, func(x lagSample) bool { return share(x) <= 0.5 })
	})
	drained := run.last()
	// 4. event writes hang until their timeout: commands end unknown.
	if err := fst.SetRules(faulty.Rule{Ops: []string{faulty.OpApplyBatchIf, faulty.OpApplyBatchesIf, faulty.OpInsertIfNotExists}, Action: faulty.Timeout}); err != nil {
		t.Fatal(err)
	}
	first := len(run.samples)
	run.sampleUntil(t, "the durable offset to stand still for 14 samples", 400, func(s []lagSample) bool {
		return len(s) >= first+16 && tail(s, 14, func(x lagSample) bool { return x.durable == s[len(s)-1].durable })
	})
	stalled := run.last()
	// 5. the fault removed: events become durable again.
	if err := fst.SetRules(); err != nil {
		t.Fatal(err)
	}
	moving := stalled.durable
	run.sampleUntil(t, "the durable offset to move for 8 samples", 400, func(s []lagSample) bool {
		return tail(s, 8, func(x lagSample) bool { return x.durable > moving })
	})
	recovered := run.last()
	t.Logf("%d samples: healthy to %d, flushes lagging at %d (%.0f%% of the limit), drained at %d, durable offset stalled at %d (%v), moving again at %d (%v)",
		len(run.samples), healthyEnd.i, lagging.i, 100*share(lagging), drained.i, stalled.i, stalled.durable, recovered.i, recovered.durable)

	file := filepath.Join(t.TempDir(), "lag_test.yml")
	rules, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(run.promtoolTest(rules, []lagExpect{
		{"CqlseqFlushLagging", "warning", healthyEnd.i, false},
		{"CqlseqFlushLagging", "warning", lagging.i, true},
		{"CqlseqFlushLagging", "warning", drained.i, false},
		{"CqlseqDurableOffsetStalled", "critical", drained.i, false},
		{"CqlseqDurableOffsetStalled", "critical", stalled.i, true},
		{"CqlseqDurableOffsetStalled", "critical", recovered.i, false},
	})), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "test", "rules", file).CombinedOutput()
	if err != nil {
		b, _ := os.ReadFile(file)
		t.Fatalf("promtool test rules: %v\n%s\nthe test file:\n%s", err, out, b)
	}
}

// lagSample is one sample of a lag run's metrics.
type lagSample struct {
	i                         int // its index: the minute of the promtool test
	unflushed, limit, durable float64
	commands                  map[string]float64 // by result
}

type lagRun struct {
	reg     *prometheus.Registry
	samples []lagSample
}

func (r *lagRun) last() lagSample { return r.samples[len(r.samples)-1] }

func (r *lagRun) sample(t *testing.T) {
	t.Helper()
	time.Sleep(lagSampleEvery)
	mfs, err := r.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	s := lagSample{i: len(r.samples), commands: map[string]float64{}}
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			switch mf.GetName() {
			case "cqlseq_sequencer_unflushed_values":
				s.unflushed = mt.GetGauge().GetValue()
			case "cqlseq_sequencer_unflushed_values_limit":
				s.limit = mt.GetGauge().GetValue()
			case "cqlseq_partition_durable_offset":
				s.durable = mt.GetGauge().GetValue()
			case "cqlseq_partition_commands_total":
				s.commands[labelValue(mt, "result")] = mt.GetCounter().GetValue()
			}
		}
	}
	if s.limit == 0 {
		t.Fatal("cqlseq_sequencer_unflushed_values_limit is 0: the sequencer did not report its limit")
	}
	r.samples = append(r.samples, s)
}

func (r *lagRun) sampleN(t *testing.T, n int) {
	t.Helper()
	for range n {
		r.sample(t)
	}
}

// sampleUntil samples until done holds for the samples, at most max more.
func (r *lagRun) sampleUntil(t *testing.T, what string, max int, done func([]lagSample) bool) {
	t.Helper()
	for range max {
		r.sample(t)
		if done(r.samples) {
			return
		}
	}
	s := r.last()
	t.Fatalf("waited %d samples for %s: last unflushed %v of %v, durable offset %v", max, what, s.unflushed, s.limit, s.durable)
}

// tail reports whether the last n samples all satisfy f.
func tail(s []lagSample, n int, f func(lagSample) bool) bool {
	if len(s) < n {
		return false
	}
	for _, x := range s[len(s)-n:] {
		if !f(x) {
			return false
		}
	}
	return true
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// lagExpect is one assertion of the promtool test: alert firing (or not)
// at minute at.
type lagExpect struct {
	alert, severity string
	at              int
	firing          bool
}

// promtoolTest writes the run's samples as a promtool test file of rules,
// one series per metric (target labels job="lag", instance="test"), with
// a promql_expr_test on ALERTS for each expectation.
func (r *lagRun) promtoolTest(rules string, exp []lagExpect) string {
	var b strings.Builder
	fmt.Fprintf(&b, "rule_files:\n  - %s\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n", rules)
	const lbl = `job="lag",instance="test",app="1",partition="0"`
	series := func(name, labels string, f func(lagSample) float64) {
		vals := make([]string, len(r.samples))
		for i, s := range r.samples {
			vals[i] = strconv.FormatFloat(f(s), 'f', -1, 64)
		}
		fmt.Fprintf(&b, "      - series: '%s{%s}'\n        values: '%s'\n", name, labels, strings.Join(vals, " "))
	}
	series("cqlseq_sequencer_unflushed_values", lbl, func(s lagSample) float64 { return s.unflushed })
	series("cqlseq_sequencer_unflushed_values_limit", lbl, func(s lagSample) float64 { return s.limit })
	series("cqlseq_partition_durable_offset", lbl, func(s lagSample) float64 { return s.durable })
	var results []string
	for res := range r.samples[0].commands {
		results = append(results, res)
	}
	sort.Strings(results)
	for _, res := range results {
		series("cqlseq_partition_commands_total", lbl+`,result="`+res+`"`, func(s lagSample) float64 { return s.commands[res] })
	}
	b.WriteString("    promql_expr_test:\n")
	for _, e := range exp {
		fmt.Fprintf(&b, "      - expr: 'ALERTS{alertname=\"%s\",alertstate=\"firing\"}'\n        eval_time: %dm\n", e.alert, e.at)
		if !e.firing {
			b.WriteString("        exp_samples: []\n")
			continue
		}
		fmt.Fprintf(&b, "        exp_samples:\n          - labels: 'ALERTS{alertname=\"%s\",alertstate=\"firing\",severity=\"%s\",%s}'\n            value: 1\n", e.alert, e.severity, lbl)
	}
	return b.String()
}
