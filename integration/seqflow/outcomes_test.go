package seqflow

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/apppart/appparttest"
	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/metrics"
	"github.com/cqlseq/cqlseq/plog"
)

// Partition IDs of the outcome tests (partOutcomes + 10 x mode + 0..3).
const (
	partOutcomes = 600
	partAlert    = 700
)

// TestOutcomesCQL: appparttest.Outcomes on the real cluster, in every
// mode: a write whose answer is lost, one not applied, ctx ending while a
// command waits, a refused write (the store's faults injected client-side
// by storage/faulty around the cql store).
func TestOutcomesCQL(t *testing.T) {
	itest.NoLeaks(t)
	st := open(t)
	for _, mode := range []plog.Mode{plog.ModeTrust0, plog.ModeTrust1, plog.ModeTrust2, plog.ModeFenced} {
		t.Run(mode.String(), func(t *testing.T) {
			appparttest.Outcomes(t, st, partOutcomes+10*isequencer.PartitionID(mode), mode)
		})
	}
}

// TestStoppedPartitionAlertCQL provokes a conflict on the real cluster (a
// trust-0 partition meets another writer's event at its next offset) and
// feeds the series the metrics package then exports to promtool with
// ops/prometheus/cqlseq-alerts.yml: CqlseqPartitionStopped fires with the
// partition's app, partition and reason.
func TestStoppedPartitionAlertCQL(t *testing.T) {
	itest.NoLeaks(t)
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not on PATH (Debian: apt-get install prometheus); .ci/run installs it")
	}
	st := open(t)
	reg := prometheus.NewRegistry()
	mc, err := metrics.New(reg)
	require.NoError(t, err)
	o := appparttest.Options(st, partAlert, plog.ModeTrust0)
	o.Metrics = mc.Partition(appparttest.App, partAlert)
	p := appparttest.Open(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, p.WaitReady(ctx))
	ws := appparttest.WS(partAlert, 1)
	r1, err := p.Do(ctx, appparttest.Cmd(ws))
	require.NoError(t, err)
	w, err := plog.NewWriter(plog.WriterOptions{Storage: st, Partition: partAlert, Mode: plog.ModeTrust0})
	require.NoError(t, err)
	require.NoError(t, w.Write(ctx, &plog.Event{Partition: partAlert, Offset: r1.Offset + 1, WSID: ws, WSKind: appparttest.Kind, Payload: []byte("another writer")}))
	_, err = p.Do(ctx, appparttest.Cmd(ws))
	require.ErrorIs(t, err, apppart.ErrStopped)

	// The exported series, as a scrape would give them.
	mfs, err := reg.Gather()
	require.NoError(t, err)
	var series []string
	for _, mf := range mfs {
		if mf.GetName() != "cqlseq_partition_stopped" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := []string{`job="cqlseq"`, `instance="it:9100"`}
			for _, lp := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
			}
			series = append(series, fmt.Sprintf("      - series: '%s{%s}'\n        values: '%gx5'\n", mf.GetName(), strings.Join(labels, ","), m.GetGauge().GetValue()))
		}
	}
	require.Len(t, series, 1, "one stopped partition")

	rules, err := filepath.Abs(filepath.Join("..", "..", "ops", "prometheus", "cqlseq-alerts.yml"))
	require.NoError(t, err)
	dir := t.TempDir()
	test := fmt.Sprintf(`rule_files:
  - %s
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
%s    alert_rule_test:
      - eval_time: 2m
        alertname: CqlseqPartitionStopped
        exp_alerts:
          - exp_labels:
              severity: critical
              job: cqlseq
              instance: it:9100
              app: "%[3]d"
              partition: "%[4]d"
              reason: conflict
            exp_annotations:
              runbook_url: docs/runbooks.md#cqlseqpartitionstopped
              summary: "cqlseq partition %[4]d of app %[3]d on it:9100 stopped (conflict): it takes no commands"
              description: >-
                A write of partition %[4]d was refused and the partition takes no more commands
                (apppart.ErrStopped) until an operator reopens it. reason=conflict: an event or a record
                was already stored under one of its keys (trust0, trust1: another writer, or a restored
                keyspace); reason=fenced: another owner took the partition over. Look before reopening:
                the process log line "group write refused, partition stopped" names the offsets; cqlseq
                inspect and cqlseq verify show the PLog there.
`, rules, strings.Join(series, ""), appparttest.App, partAlert)
	path := filepath.Join(dir, "stopped_test.yml")
	require.NoError(t, os.WriteFile(path, []byte(test), 0o644))
	out, err := exec.CommandContext(ctx, promtool, "test", "rules", path).CombinedOutput()
	require.NoError(t, err, "promtool test rules:\n%s\n%s", out, test)
}
