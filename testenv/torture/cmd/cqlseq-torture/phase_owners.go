package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogcheck"
	"github.com/cqlseq/cqlseq/storage/cql"
	"github.com/cqlseq/cqlseq/testenv/torture"
)

// ownersPhase is the two-owner fencing check.
type ownersPhase struct{}

func (ownersPhase) name() string { return "owners" }

func (ownersPhase) run(ctx context.Context, t *tort) error {
	if ok, err := t.nodeFaulter("owners"); !ok {
		return err
	}
	return t.owners(ctx)
}

// ownerPayload is the payload size of round i's owner A (even) and B
// (odd): the PLog's events tell who wrote them.
func ownerPayload(i int, b bool) int {
	if b {
		return 101 + 2*i
	}
	return 100 + 2*i
}

// ownerOf tells round i's owners' events apart by payload size.
func ownerOf(i, payload int) torture.Owner {
	switch payload {
	case ownerPayload(i, false):
		return torture.OwnerA
	case ownerPayload(i, true):
		return torture.OwnerB
	}
	return torture.OwnerOther
}

// owners: owner A is paused longer than the request timeout; owner B opens
// the same partitions (in fenced mode a new epoch fences A off) and runs;
// A is resumed. Then, per round and partition, no event of A may be
// durable, and no command acknowledged by A, at or above B's first offset
// (torture.CheckTakeover). When A wrote its ack lines does not matter: a
// paused A logs, after SIGCONT, acks of events durable before B began.
func (t *tort) owners(ctx context.Context) error {
	mode := t.c.ownersMode
	ks, err := t.keyspace(ctx, "owners")
	if err != nil {
		return err
	}
	r := row{phase: fmt.Sprintf("two owners (%s)", mode)}
	combined := filepath.Join(t.c.dir, "acks-owners.log")
	type round struct{ ackA, ackB string }
	var rounds []round
	var logs, failed []string
	late := 0
	for i := range t.c.nodeFaults {
		rd := round{filepath.Join(t.c.dir, fmt.Sprintf("acks-owners-%d-a.log", i)), filepath.Join(t.c.dir, fmt.Sprintf("acks-owners-%d-b.log", i))}
		rounds = append(rounds, rd)
		logs = append(logs, rd.ackA, rd.ackB)
		a, err := t.startBench(ks, mode, smallLoad, rd.ackA, fmt.Sprintf("owners-%d-a", i), "--payload", strconv.Itoa(ownerPayload(i, false)))
		if err != nil {
			return err
		}
		defer a.stop()
		if _, err := waitAcks(ctx, a, 0, 5*time.Minute); err != nil {
			return fmt.Errorf("owner A: %w", err)
		}
		t.logf("owners #%d: SIGSTOP owner A (pid %d), owner B takes over", i+1, a.cmd.Process.Pid)
		_ = a.cmd.Process.Signal(syscall.SIGSTOP)
		stopped := time.Now()
		if err := sleep(ctx, t.c.timeout+2*time.Second); err != nil {
			return err
		}
		b, err := t.startBench(ks, mode, smallLoad, rd.ackB, fmt.Sprintf("owners-%d-b", i), "--payload", strconv.Itoa(ownerPayload(i, true)))
		if err != nil {
			return err
		}
		defer b.stop()
		if _, err := waitAcks(ctx, b, 0, 5*time.Minute); err != nil {
			return fmt.Errorf("owner B: %w", err)
		}
		nA := countAcks(rd.ackA)
		_ = a.cmd.Process.Signal(syscall.SIGCONT)
		t.mark(fmt.Sprintf("A stopped, B takes over #%d", i+1), stopped, time.Now())
		if err := sleep(ctx, 5*time.Second); err != nil {
			return err
		}
		late += countAcks(rd.ackA) - nA
		failed = append(failed, "A "+a.interrupt(), "B "+b.interrupt())
		r.faults++
	}
	if err := concatAcks(combined, logs); err != nil {
		return err
	}
	r.acked = countAcks(combined)
	r.failed = strings.Join(failed[len(failed)-2:], ", ")

	events, err := t.readEvents(ctx, ks, smallLoad.partitions)
	if err != nil {
		return fmt.Errorf("owners: reading the PLog: %w", err)
	}
	var violations []string
	for i, rd := range rounds {
		in := torture.Takeover{}
		a, err := plogcheck.ReadAckLog(rd.ackA)
		if err != nil {
			return err
		}
		b, err := plogcheck.ReadAckLog(rd.ackB)
		if err != nil {
			return err
		}
		in.AAcks, in.BAcks = torture.AckOffsets(a.Acks), torture.AckOffsets(b.Acks)
		for _, e := range events {
			if o := ownerOf(i, e.payload); o != torture.OwnerOther {
				in.Events = append(in.Events, torture.OwnedEvent{Partition: e.part, Offset: e.off, Owner: o})
			}
		}
		rep := torture.CheckTakeover(in)
		t.logf("owners #%d: %s", i+1, rep.Summary())
		if len(rep.Unjudged) > 0 {
			t.logf("owners #%d: B wrote nothing in partitions %v: not judged there", i+1, rep.Unjudged)
		}
		for _, v := range rep.Violations {
			violations = append(violations, fmt.Sprintf("round %d: %s", i+1, v))
		}
	}
	if len(violations) > 0 {
		t.failed = true
		r.note = fmt.Sprintf("FENCING FAILED: %d events or acks of A at or above B's first offset, first: %s", len(violations), violations[0])
		for _, v := range violations[:min(len(violations), 20)] {
			t.logf("owners: FAILED: %s", v)
		}
	} else {
		r.note = fmt.Sprintf("A paused past the request timeout, B took over: no event or ack of A at or above B's first offset (%d A acks logged after SIGCONT, all below)", late)
	}
	if err := t.verify(ctx, ks, combined, smallLoad.partitions, &r); err != nil {
		return err
	}
	t.rows = append(t.rows, r)
	return nil
}

// ownedEvent is what the owners check keeps of a PLog event.
type ownedEvent struct {
	part    uint16
	off     uint64
	payload int
}

// plogReader opens ks on the campaign's hosts and returns a PLog reader
// over it and the function that closes the store.
func (t *tort) plogReader(ctx context.Context, ks string) (*plog.Reader, func(), error) {
	st, err := cql.Open(ctx, cql.Options{Hosts: strings.Split(t.c.hosts, ","), Keyspace: ks, Timeout: 30 * time.Second, ConnectTimeout: 30 * time.Second})
	if err != nil {
		return nil, nil, err
	}
	rd, err := plog.NewReader(st, plog.ReaderOptions{PageTimeout: time.Minute})
	if err != nil {
		_ = st.Close()
		return nil, nil, err
	}
	return rd, func() { _ = st.Close() }, nil
}

// readEvents reads partitions 0..parts-1 of ks's PLog (from offset 1 to
// the first missing offset).
func (t *tort) readEvents(ctx context.Context, ks string, parts int) ([]ownedEvent, error) {
	rd, done, err := t.plogReader(ctx, ks)
	if err != nil {
		return nil, err
	}
	defer done()
	var out []ownedEvent
	for p := range parts {
		err := rd.ReadEvents(ctx, isequencer.PartitionID(p), 1, func(e *plog.Event) error {
			out = append(out, ownedEvent{part: uint16(p), off: uint64(e.Offset), payload: len(e.Payload)})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
