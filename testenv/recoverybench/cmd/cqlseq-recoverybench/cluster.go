package main

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/gocql/gocql"

	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

// replication returns the replication map of the keyspaces this program
// creates at replication factor rf: NetworkTopologyStrategy with the data
// centre of the first reachable host (system.local) when the cluster has
// several nodes (system.peers is not empty), else SimpleStrategy.
func replication(hosts []string, rf int) (string, error) {
	if rf < 1 {
		return "", fmt.Errorf("-rf %d: want at least 1", rf)
	}
	c := gocql.NewCluster(hosts...)
	c.Timeout, c.ConnectTimeout = 10*time.Second, 10*time.Second
	c.Consistency = gocql.One
	s, err := c.CreateSession()
	if err != nil {
		return "", fmt.Errorf("reading the data centre: %w", err)
	}
	defer s.Close()
	var dc string
	if err := s.Query("SELECT data_center FROM system.local").Scan(&dc); err != nil {
		return "", fmt.Errorf("reading the data centre: %w", err)
	}
	// Counted row by row: count(*) makes gocql log a warning.
	var peers int64
	iter := s.Query("SELECT peer FROM system.peers").Iter()
	var peer string
	for iter.Scan(&peer) {
		peers++
	}
	if err := iter.Close(); err != nil {
		return "", fmt.Errorf("counting the nodes: %w", err)
	}
	if peers+1 < int64(rf) {
		return "", fmt.Errorf("-rf %d: the cluster has %d nodes", rf, peers+1)
	}
	if peers == 0 {
		return fmt.Sprintf("{'class': 'SimpleStrategy', 'replication_factor': %d}", rf), nil
	}
	return fmt.Sprintf("{'class': 'NetworkTopologyStrategy', '%s': %d}", dc, rf), nil
}

// pauser SIGSTOPs node of a launcher cluster during each timed child: after
// after, for dur. It resumes the node on every path: at the end of each
// pause, in close (deferred by run) and on SIGINT, SIGTERM and SIGHUP.
type pauser struct {
	cluster    *cassandra.Cluster
	node       int
	after, dur time.Duration

	mu     sync.Mutex
	paused bool
	closed bool
	count  int
	total  time.Duration
	sigs   chan os.Signal
}

func newPauser(state string, node int, after, dur time.Duration) (*pauser, error) {
	c, err := cassandra.ReadClusterState(state)
	if err != nil {
		return nil, err
	}
	inst, err := c.Node(node)
	if err != nil {
		return nil, err
	}
	if !inst.Running() {
		return nil, fmt.Errorf("-pause-node %d (pid %d): not running", node, inst.PID)
	}
	if dur <= 0 {
		return nil, fmt.Errorf("-pause-for %v: want a positive duration", dur)
	}
	p := &pauser{cluster: c, node: node, after: after, dur: dur, sigs: make(chan os.Signal, 1)}
	signal.Notify(p.sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		sig, ok := <-p.sigs
		if !ok {
			return
		}
		p.close()
		fmt.Fprintf(os.Stderr, "cqlseq-recoverybench: %v: node %d resumed, stopping\n", sig, p.node)
		os.Exit(130)
	}()
	return p, nil
}

func (p *pauser) String() string {
	inst, _ := p.cluster.Node(p.node)
	return fmt.Sprintf("node %d (%s, pid %d)", p.node, inst.Host, inst.PID)
}

func (p *pauser) pause() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.paused {
		return nil
	}
	if err := cassandra.PauseNode(p.cluster, p.node); err != nil {
		return err
	}
	p.paused = true
	return nil
}

func (p *pauser) resume() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resumeLocked()
}

func (p *pauser) resumeLocked() error {
	if !p.paused {
		return nil
	}
	if err := cassandra.ResumeNode(p.cluster, p.node); err != nil {
		return err
	}
	p.paused = false
	return nil
}

// close resumes the node if it is paused and pauses it no more.
func (p *pauser) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	return p.resumeLocked()
}

// stop ends the signal handling and resumes the node.
func (p *pauser) stop() error {
	signal.Stop(p.sigs)
	return p.close()
}

// around runs f (a timed child) with the node paused from p.after after
// f's start for p.dur (the pause lasts its whole length even when f ends
// first; it is not begun if f ends before p.after), and describes what
// happened.
func (p *pauser) around(f func()) (string, error) {
	began := time.Now()
	done := make(chan time.Duration, 1)
	go func() {
		f()
		done <- time.Since(began)
	}()
	select {
	case end := <-done:
		return fmt.Sprintf("not paused: the child ended at %.2f s, before %v", end.Seconds(), p.after), nil
	case <-time.After(p.after):
	}
	if err := p.pause(); err != nil {
		<-done
		return "", fmt.Errorf("pausing %v: %w", p, err)
	}
	pausedAt := time.Since(began)
	var end time.Duration
	ended := false
	timer := time.NewTimer(p.dur)
	select {
	case end = <-done:
		ended = true
		<-timer.C
	case <-timer.C:
	}
	if err := p.resume(); err != nil {
		if !ended {
			<-done
		}
		return "", fmt.Errorf("resuming %v: %w", p, err)
	}
	resumedAt := time.Since(began)
	p.mu.Lock()
	p.count++
	p.total += resumedAt - pausedAt
	p.mu.Unlock()
	if !ended {
		end = <-done
	}
	where := "during the pause"
	if end > resumedAt {
		where = "after the resume"
	}
	return fmt.Sprintf("node %d paused %.2f-%.2f s (%.2f s); the child ended at %.2f s, %s",
		p.node, pausedAt.Seconds(), resumedAt.Seconds(), (resumedAt - pausedAt).Seconds(), end.Seconds(), where), nil
}

// summary reports the pauses made.
func (p *pauser) summary() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	state := "running"
	if p.paused {
		state = "still paused"
	}
	return fmt.Sprintf("%v paused %d times, %v after each timed child's start for %v (%.1f s in all); it is %s",
		p, p.count, p.after, p.dur, p.total.Seconds(), state)
}
