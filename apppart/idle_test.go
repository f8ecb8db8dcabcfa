package apppart_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/boltdb"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// maxIdlePartitionHeap is what a partition that has run one command may
// hold while idle (issue 26: a VVM-like host runs hundreds of partitions).
const maxIdlePartitionHeap = 64 << 10

// TestManyIdlePartitions opens 1,000 partitions on one store (200 under
// the race detector), runs one command on each, and reports the heap each
// holds while idle and the goroutines each runs, in trust2 and fenced mode
// on mem, and in trust2 on bbolt (group commit).
func TestManyIdlePartitions(t *testing.T) {
	n := 1000
	if raceEnabled {
		n = 200
	}
	cases := []struct {
		name string
		mode plog.Mode
		bolt bool
	}{
		{"mem/trust2", plog.ModeTrust2, false},
		{"mem/fenced", plog.ModeFenced, false},
		{"bbolt/trust2", plog.ModeTrust2, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var st storage.Storage = mem.New(mem.Options{})
			if c.bolt {
				b, err := boltdb.Open(filepath.Join(t.TempDir(), "idle.db"), boltdb.Options{})
				require.NoError(t, err)
				t.Cleanup(func() { _ = b.Close() })
				st = b
			}
			logger := slog.New(slog.NewTextHandler(io.Discard, nil))
			runtime.GC()
			var before runtime.MemStats
			runtime.ReadMemStats(&before)
			goroutines := runtime.NumGoroutine()
			parts := make([]*apppart.Partition, 0, n)
			t.Cleanup(func() {
				for _, p := range parts {
					_ = p.Close()
				}
			})
			for i := range n {
				p, err := apppart.Open(context.Background(), apppart.OpenOptions{
					Storage: st, App: 1, Partition: isequencer.PartitionID(i), Mode: c.mode,
					SeqTypes:   map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number{1: {1: 1, 2: 100}},
					RecordSeqs: []isequencer.SeqID{2},
					Logger:     logger,
					Sequencer:  isequencer.Params{Logger: logger},
				})
				require.NoError(t, err)
				parts = append(parts, p)
			}
			for i, p := range parts {
				require.NoError(t, doWhenReady(p, apppart.Command{WSKind: 1, WSID: isequencer.WSID(i + 1), Seqs: []isequencer.SeqID{1, 2}}), "partition %d", i)
			}
			runtime.GC()
			var after runtime.MemStats
			runtime.ReadMemStats(&after)
			heap := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / int64(n)
			perPart := float64(runtime.NumGoroutine()-goroutines) / float64(n)
			t.Logf("%d partitions: %.1f KiB of heap and %.1f goroutines per idle partition", n, float64(heap)/1024, perPart)
			assert.LessOrEqual(t, heap, int64(maxIdlePartitionHeap), "heap per idle partition")
		})
	}
}

// doWhenReady runs cmd, retrying ErrBusy (the actualization Open starts).
func doWhenReady(p *apppart.Partition, cmd apppart.Command) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := p.Do(context.Background(), cmd)
		if !errors.Is(err, apppart.ErrBusy) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still busy after 30 s: %w", err)
		}
		time.Sleep(200 * time.Microsecond)
	}
}
