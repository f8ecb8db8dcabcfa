package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/testenv/torture"
)

// verifyAttempts bounds the runs of one verify that the store refused a
// read of (see verify).
const verifyAttempts = 3

// verify runs cqlseq verify --acks on ks (partitions 0..parts-1) and fills
// r's counts from its JSON report. It first waits until the cluster is
// whole (waitWhole): the phase's faults are over, and a node still
// rejoining (after a one-way cut, one that holds its peers down refuses
// LOCAL_QUORUM reads) would fail the check for want of replicas, not for
// anything lost. A node can still hold its peers down again seconds after
// the ring was seen whole (its failure detector flaps after the cut
// heals): a run the store refused a read in (storeRefused) wrote no
// verdict, so the same verify runs again after the next waitWhole, up to
// verifyAttempts runs; each refusal is logged and listed with the
// cluster's repairs. A run that wrote a verdict is never run again.
func (t *tort) verify(ctx context.Context, ks, ackLog string, parts int, r *row) error {
	return t.verifyStore(ctx, ks, []string{"--store", "cql", "--hosts", t.c.hosts, "--keyspace", ks, "--timeout", "30s"}, true, ackLog, parts, r)
}

// verifyBolt runs cqlseq verify --acks on the bbolt file (partitions
// 0..parts-1) and fills r's counts from its JSON report. No process may
// have the file open (bbolt locks it): the caller has stopped them.
func (t *tort) verifyBolt(ctx context.Context, file, ackLog string, parts int, r *row) error {
	return t.verifyStore(ctx, filepath.Base(file), []string{"--store", "bbolt", "--file", file}, false, ackLog, parts, r)
}

// verifyStore runs cqlseq verify --acks with the store flags given; name
// names the store in the log and the report's file. On a cluster it waits
// for the whole cluster first and runs again after a refused read (see
// verify).
func (t *tort) verifyStore(ctx context.Context, name string, store []string, cluster bool, ackLog string, parts int, r *row) error {
	ps := make([]string, parts)
	for i := range ps {
		ps[i] = strconv.Itoa(i)
	}
	jf := filepath.Join(t.c.dir, "verify-"+name+".json")
	var (
		out string
		err error
		b   []byte
	)
	for attempt := 1; ; attempt++ {
		if cluster {
			if err := t.waitWhole(ctx, "verify "+name); err != nil {
				return err
			}
		}
		_ = os.Remove(jf)
		args := append(append([]string{"verify"}, store...), "--partition", strings.Join(ps, ","), "--acks", ackLog, "--json", jf)
		out, err = t.cqlseqOut(ctx, args...)
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			return fmt.Errorf("verify %s: %w\n%s", name, err, out)
		}
		var jerr error
		if b, jerr = os.ReadFile(jf); jerr == nil {
			break
		}
		if !cluster || !storeRefused(out) || attempt == verifyAttempts {
			return fmt.Errorf("verify %s wrote no report (%v): %v\n%s", name, err, jerr, out)
		}
		why := lastLine(out)
		t.logf("verify %s: the store refused a read, no verdict (run %d of at most %d): %s; waiting for the cluster and running it again", name, attempt, verifyAttempts, why)
		t.repairs = append(t.repairs, fmt.Sprintf("verify %s ran again: the store refused a read (%s)", name, why))
	}
	v, perr := torture.ParseVerdict(b)
	if perr != nil {
		return fmt.Errorf("verify %s: %w", name, perr)
	}
	r.lost += v.Lost
	r.dups += v.Duplicates
	r.regs += v.Regressions
	if err != nil || !v.OK {
		r.verifyFail = true
		t.failed = true
		t.logf("verify %s FAILED:\n%s", name, out)
	} else {
		t.logf("verify %s: OK (%s)", name, lastLine(out))
	}
	return nil
}

// storeRefused reports whether the output of a cqlseq verify that wrote no
// report says the store was unavailable (a replica missing, a read
// refused or timed out): nothing was judged.
func storeRefused(out string) bool {
	return strings.Contains(out, storage.ErrUnavailable.Error())
}

func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return ls[len(ls)-1]
}
