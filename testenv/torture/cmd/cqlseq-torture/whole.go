package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cqlseq/cqlseq/storage/cql"
	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

// waitWhole waits, up to -whole-timeout, until the cluster is whole before
// phase name begins: with -state, every node's process runs (a node that
// is not running fails at once: nothing would restart it) and every node
// sees every node up and normal and answers a read at consistency ALL
// (cassandra.WaitRing); with -hosts only, every host answers a query.
//
// A node that still holds live peers down when half of -whole-timeout has
// passed (cassandra.RingError.HoldsPeersDown: after the partition phase's
// one-way cut, Cassandra 5.0.8's node 3 logged no "is now UP" for 11
// minutes) is restarted, as an operator would, once per phase; the log
// says so, and the phase's faults stay counted as they were.
func (t *tort) waitWhole(ctx context.Context, name string) error {
	began := time.Now()
	var err error
	if t.cluster != nil {
		if err := nodesRunning(t.cluster); err != nil {
			return fmt.Errorf("%s: the cluster is not whole before the phase: %w", name, err)
		}
		err = cassandra.WaitRing(ctx, t.cluster, t.c.wholeTimeout/2)
		var re *cassandra.RingError
		if errors.As(err, &re) && re.HoldsPeersDown() {
			t.logf("%s: CLUSTER REPAIR: node %d still holds live peers down (%v); restarting it", name, re.Node, re.Err)
			t.repairs = append(t.repairs, fmt.Sprintf("before %s: node %d restarted (it held live peers down: %v)", name, re.Node, re.Err))
			err = t.restartNode(ctx, re.Node, time.Second)
		}
		if err != nil {
			if rest := t.c.wholeTimeout - time.Since(began); rest > 0 {
				err = cassandra.WaitRing(ctx, t.cluster, rest)
			}
		}
	} else {
		err = waitUntil(ctx, t.c.wholeTimeout, time.Second, t.hostsAnswer)
	}
	if err != nil {
		return fmt.Errorf("%s: the cluster is not whole before the phase: %w", name, err)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.logf("%s: waited %.1f s for the cluster to be whole", name, d.Seconds())
	}
	return nil
}

// nodesRunning fails for the first node of c whose process does not run.
func nodesRunning(c *cassandra.Cluster) error {
	for i, n := range c.Nodes {
		if !n.Running() {
			return fmt.Errorf("node %d (%s, pid %d) is not running", i+1, n.Host, n.PID)
		}
	}
	return nil
}

// hostsAnswer fails unless every -hosts host answers a read of
// system.local, each on a session of its own.
func (t *tort) hostsAnswer(ctx context.Context) error {
	var errs []error
	for _, h := range strings.Split(t.c.hosts, ",") {
		c, err := cql.ClusterConfig(cql.Options{Hosts: []string{h}, Timeout: 5 * time.Second, ConnectTimeout: 5 * time.Second, DisableInitialHostLookup: true})
		if err != nil {
			return err
		}
		s, err := c.CreateSession()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", h, err))
			continue
		}
		var v string
		if err := s.Query("SELECT release_version FROM system.local").WithContext(ctx).Scan(&v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", h, err))
		}
		s.Close()
	}
	return errors.Join(errs...)
}

// waitUntil calls check every `every` until it returns nil, and fails
// after limit with check's last error (or at once when ctx is done).
func waitUntil(ctx context.Context, limit, every time.Duration, check func(context.Context) error) error {
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		err := check(wctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case <-wctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("not within %v: %w", limit, err)
		case <-time.After(every):
		}
	}
}
