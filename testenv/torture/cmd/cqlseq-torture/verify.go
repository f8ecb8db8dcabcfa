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

	"github.com/cqlseq/cqlseq/testenv/torture"
)

// verify runs cqlseq verify --acks on ks (partitions 0..parts-1) and fills
// r's counts from its JSON report. It first waits until the cluster is
// whole (waitWhole): the phase's faults are over, and a node still
// rejoining (after a one-way cut, one that holds its peers down refuses
// LOCAL_QUORUM reads) would fail the check for want of replicas, not for
// anything lost.
func (t *tort) verify(ctx context.Context, ks, ackLog string, parts int, r *row) error {
	if err := t.waitWhole(ctx, "verify "+ks); err != nil {
		return err
	}
	ps := make([]string, parts)
	for i := range ps {
		ps[i] = strconv.Itoa(i)
	}
	jf := filepath.Join(t.c.dir, "verify-"+ks+".json")
	_ = os.Remove(jf)
	out, err := t.cqlseqOut(ctx, "verify", "--store", "cql", "--hosts", t.c.hosts, "--keyspace", ks, "--timeout", "30s",
		"--partition", strings.Join(ps, ","), "--acks", ackLog, "--json", jf)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return fmt.Errorf("verify %s: %w\n%s", ks, err, out)
	}
	b, jerr := os.ReadFile(jf)
	if jerr != nil {
		return fmt.Errorf("verify %s wrote no report (%v): %v\n%s", ks, err, jerr, out)
	}
	v, perr := torture.ParseVerdict(b)
	if perr != nil {
		return fmt.Errorf("verify %s: %w", ks, perr)
	}
	r.lost += v.Lost
	r.dups += v.Duplicates
	r.regs += v.Regressions
	if err != nil || !v.OK {
		r.verifyFail = true
		t.failed = true
		t.logf("verify %s FAILED:\n%s", ks, out)
	} else {
		t.logf("verify %s: OK (%s)", ks, lastLine(out))
	}
	return nil
}

func lastLine(s string) string {
	ls := strings.Split(strings.TrimSpace(s), "\n")
	return ls[len(ls)-1]
}
