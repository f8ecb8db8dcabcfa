package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/testenv/cassandra"
)

// latePhase delivers an owner's timed-out writes after the next owner,
// in another mode, has opened the partitions and acknowledged commands
// (issue 49). One keyspace; per handover from mode m to the next of
// -late-modes (trust2 between each other mode, so that the handovers
// change the mode both ways):
//
//  1. a writer in mode m, connected to node 1 only, runs; nodes 2 and 3
//     are SIGSTOPped for -late-hold under its load: node 1 applies what
//     it coordinates, the write times out at the client (outcome
//     unknown; trust2 writes the same bytes again), and node 1 keeps a
//     hint for each of the others;
//  2. the writer is SIGKILLed; once what node 1 sent nodes 2 and 3 has
//     expired (-late-expire past write_request_timeout: a node drops a
//     mutation received after its timeout), node 1 is SIGSTOPped and
//     nodes 2 and 3 resumed: the quorum the next owner reads and writes
//     at holds none of the writes in doubt;
//  3. the next owner starts in the next mode, connected to every node,
//     and acknowledges commands;
//  4. node 1 is resumed under its load: node 1's hints are replayed to
//     nodes 2 and 3 and quorum reads that meet its rows repair them; the
//     dead writer's writes land with their own timestamps (a trust2
//     write's is 2^62 + its version, above every LWT's). The owner runs
//     -late-settle more and is SIGKILLed.
//
// verify --acks then judges every acknowledgement of the phase: no later
// owner's acknowledged event may have been replaced. The phase also counts
// the rows found past a gap marker's offset inside its gap (rows no reader
// reads: the late writes that an owner's seal abandoned) by the process
// that wrote them, so that the run shows the fault happened.
type latePhase struct{}

func (latePhase) name() string { return "late" }

func (latePhase) run(ctx context.Context, t *tort) error {
	if len(t.c.lateModes) < 2 {
		return nil
	}
	if ok, err := t.nodeFaulter("late"); !ok {
		return err
	}
	return t.late(ctx)
}

// lateLoad is the late phase's load: few workspaces, so that a dead
// writer's late write and the next owner's commands meet the same number
// rows, and several partitions, so that each handover leaves several
// partitions with writes in doubt.
var lateLoad = load{partitions: 4, concurrency: 4, workspaces: 40}

// latePayload is the payload size of the late phase's k-th process: the
// PLog's rows tell who wrote them.
func latePayload(k int) int { return 300 + k }

// lateOwner returns the late-phase process whose payload size is n, or -1.
func lateOwner(n, procs int) int {
	if k := n - latePayload(0); k >= 0 && k < procs {
		return k
	}
	return -1
}

func (t *tort) late(ctx context.Context) error {
	ks, err := t.keyspace(ctx, "late")
	if err != nil {
		return err
	}
	node1, err := t.cluster.Node(1)
	if err != nil {
		return err
	}
	modes := t.c.lateModes
	nm := &nemesis{skew: "none"}
	r := row{phase: "late writes " + strings.Join(modes, " -> "), failed: "n/a (killed)", nem: nm}
	var cs []*child
	defer func() {
		for _, c := range cs {
			c.stop()
		}
	}()
	start := func(mode, role string, extra ...string) (*child, error) {
		k := len(cs)
		o := owner{tag: fmt.Sprintf("late-%d-%s-%s", k+1, role, mode), mode: mode,
			extra: append([]string{"--payload", strconv.Itoa(latePayload(k))}, extra...)}
		c, err := t.startOwner(ks, lateLoad, o)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
		nm.runs++
		if _, err := waitAcks(ctx, c, 0, 5*time.Minute); err != nil {
			return nil, fmt.Errorf("late: %s: %w", o.tag, err)
		}
		return c, nil
	}
	for i := 1; i < len(modes); i++ {
		step := fmt.Sprintf("late %d/%d (%s -> %s)", i, len(modes)-1, modes[i-1], modes[i])
		w, err := start(modes[i-1], "writer", "--hosts", node1.Host, "--host-lookup=false")
		if err != nil {
			return err
		}
		if err := sleep(ctx, 2*time.Second); err != nil {
			return err
		}
		began := time.Now()
		t.logf("%s: nodes 2 and 3 SIGSTOPped for %v under %s's load (node 1 only)", step, t.c.lateHold, w.tag)
		if err := t.lateHandover(ctx, w); err != nil {
			return err
		}
		if _, err := scanOwner(w, nm); err != nil {
			return err
		}
		t.logf("%s: %s SIGKILLed; %v later node 1 SIGSTOPped, nodes 2 and 3 resumed; the next owner opens in %s", step, w.tag, t.c.lateExpire, modes[i])
		b, serr := start(modes[i], "owner")
		if serr == nil {
			serr = sleep(ctx, 2*time.Second)
		}
		if err := errors.Join(serr, t.resumeNodes(1)); err != nil {
			return fmt.Errorf("late: %w", err)
		}
		t.logf("%s: node 1 resumed under %s's load: %s's writes in doubt are delivered late", step, b.tag, w.tag)
		if err := sleep(ctx, t.c.lateSettle); err != nil {
			return err
		}
		b.kill()
		if _, err := scanOwner(b, nm); err != nil {
			return err
		}
		t.mark(step, began, time.Now())
		r.faults++
	}
	found, err := t.lateRows(ctx, ks, lateLoad.partitions, len(cs))
	if err != nil {
		return fmt.Errorf("late: reading the PLog: %w", err)
	}
	r.note = fmt.Sprintf("per handover: a writer on node 1 only, nodes 2, 3 stopped %v under its load, writer killed, node 1 stopped, next owner (every node) acks, node 1 resumed, %v more; rows past gap markers: %s",
		t.c.lateHold, t.c.lateSettle, found)
	if found.total() == 0 && slices.Contains(modes[:len(modes)-1], "trust2") {
		// A trust2 writer's writes in doubt land past the next owner's
		// seal; none found means the fault was not produced and the
		// phase showed nothing.
		t.failed = true
		r.note += " **NO LATE WRITE PRODUCED**"
	}
	return t.verifyOwners(ctx, ks, lateLoad, cs, &r)
}

// lateHandover SIGSTOPs nodes 2 and 3 for -late-hold while c writes,
// SIGKILLs c, waits -late-expire, SIGSTOPs node 1 and resumes nodes 2 and
// 3. On error every node is resumed.
func (t *tort) lateHandover(ctx context.Context, c *child) error {
	if err := t.pauseNodes(2, 3); err != nil {
		return err
	}
	err := sleep(ctx, t.c.lateHold)
	c.kill()
	if err == nil {
		err = sleep(ctx, t.c.lateExpire)
	}
	if err == nil {
		err = t.pauseNodes(1)
	}
	if err = errors.Join(err, t.resumeNodes(2, 3)); err != nil {
		return fmt.Errorf("late: %w", errors.Join(err, t.resumeNodes(1)))
	}
	return nil
}

// pauseNodes SIGSTOPs the nodes (1-based); on an error it resumes those it
// stopped.
func (t *tort) pauseNodes(nodes ...int) error {
	for k, n := range nodes {
		if err := cassandra.PauseNode(t.cluster, n); err != nil {
			return errors.Join(err, t.resumeNodes(nodes[:k]...))
		}
	}
	return nil
}

// resumeNodes SIGCONTs the nodes (1-based), trying each.
func (t *tort) resumeNodes(nodes ...int) error {
	var errs []error
	for _, n := range nodes {
		errs = append(errs, cassandra.ResumeNode(t.cluster, n))
	}
	return errors.Join(errs...)
}

// lateCount counts, per process, the rows found past gap markers.
type lateCount struct {
	byOwner map[int]int
	others  int // rows past a gap marker of no late-phase process
	gaps    int // gap markers read
}

func (lc lateCount) total() int {
	n := lc.others
	for _, c := range lc.byOwner {
		n += c
	}
	return n
}

func (lc lateCount) String() string {
	if len(lc.byOwner) == 0 && lc.others == 0 {
		return fmt.Sprintf("none (%d gap markers)", lc.gaps)
	}
	var parts []string
	total := 0
	for i := 0; i < 64; i++ {
		if n := lc.byOwner[i]; n > 0 {
			parts = append(parts, fmt.Sprintf("process %d: %d", i+1, n))
			total += n
		}
	}
	s := fmt.Sprintf("%d (%s) after %d gap markers", total, strings.Join(parts, ", "), lc.gaps)
	if lc.others > 0 {
		s += fmt.Sprintf(", %d of no process", lc.others)
	}
	return s
}

// lateRows reads partitions 0..parts-1 of ks's PLog as readers do and,
// at each gap marker, the rows that follow its offset inside the gap
// (read from the marker's offset + 1 to the first missing offset): rows
// that no reader reads, which a dead owner's late writes leave.
func (t *tort) lateRows(ctx context.Context, ks string, parts, procs int) (lateCount, error) {
	lc := lateCount{byOwner: map[int]int{}}
	rd, done, err := t.plogReader(ctx, ks)
	if err != nil {
		return lc, err
	}
	defer done()
	for p := range parts {
		part := isequencer.PartitionID(p)
		var gaps [][2]isequencer.PLogOffset
		err := rd.ReadEvents(ctx, part, 1, func(e *plog.Event) error {
			if e.Skip > 0 {
				gaps = append(gaps, [2]isequencer.PLogOffset{e.Offset, e.NextOffset()})
			}
			return nil
		})
		if err != nil {
			return lc, err
		}
		lc.gaps += len(gaps)
		for _, g := range gaps {
			err := rd.ReadEvents(ctx, part, g[0]+1, func(e *plog.Event) error {
				if e.Offset >= g[1] {
					return errStopRead
				}
				if o := lateOwner(len(e.Payload), procs); o >= 0 {
					lc.byOwner[o]++
				} else {
					lc.others++
				}
				return nil
			})
			if err != nil && err != errStopRead { //nolint:errorlint // errStopRead is never wrapped
				return lc, err
			}
		}
	}
	return lc, nil
}

// errStopRead ends a ReadEvents walk early.
var errStopRead = errors.New("late: stop reading")
