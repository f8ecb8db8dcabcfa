package torture

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/cqlseq/cqlseq/plog/plogcheck"
)

// AckOffset is where an acknowledged command's event is.
type AckOffset struct {
	Partition uint16
	Offset    uint64
}

// AckOffsets returns where each acknowledged command's event is.
func AckOffsets(acks []plogcheck.Ack) []AckOffset {
	out := make([]AckOffset, len(acks))
	for i, a := range acks {
		out[i] = AckOffset{Partition: uint16(a.Partition), Offset: uint64(a.Offset)}
	}
	return out
}

// Owner names who wrote an event of the two-owner check.
type Owner uint8

const (
	OwnerOther Owner = iota // neither (an earlier round, another writer)
	OwnerA                  // the deposed owner
	OwnerB                  // the owner that took over
)

func (o Owner) String() string {
	switch o {
	case OwnerA:
		return "A"
	case OwnerB:
		return "B"
	}
	return "other"
}

// OwnedEvent is a PLog event and who wrote it (the campaign tells A's
// events from B's by their payload sizes).
type OwnedEvent struct {
	Partition uint16
	Offset    uint64
	Owner     Owner
}

// Takeover is what one round of the two-owner check saw: owner A was
// paused, B took the partitions over, A was resumed.
type Takeover struct {
	AAcks, BAcks []AckOffset
	Events       []OwnedEvent // the PLog's events (those of OwnerOther are ignored)
}

// TakeoverPartition is the check's view of one partition.
type TakeoverPartition struct {
	Partition uint16
	// BFirst is B's first offset: its lowest acknowledged offset or
	// durable event, whichever is lower (0: B wrote nothing there, and
	// the partition cannot be judged).
	BFirst uint64
	// AHighestAck and AHighestEvent are A's highest acknowledged offset
	// and highest durable event (0: none).
	AHighestAck, AHighestEvent uint64
}

// TakeoverReport is the check's verdict on one round.
type TakeoverReport struct {
	Partitions []TakeoverPartition // in partition order
	// Violations: an event of A durable at or above B's first offset, or
	// an acknowledgement by A of such an offset.
	Violations []string
	// Unjudged are the partitions where A acknowledged or wrote but B
	// wrote nothing, so no offset of B bounds A.
	Unjudged []uint16
}

// CheckTakeover judges what fencing promises once B has taken a partition
// over from A: no event of A is durable at or above B's first offset, and
// A acknowledges no command at such an offset. When A's ack lines were
// written does not matter: a paused A may log, after it resumes, commands
// whose events were durable before B began.
func CheckTakeover(in Takeover) TakeoverReport {
	parts := map[uint16]*TakeoverPartition{}
	get := func(p uint16) *TakeoverPartition {
		if parts[p] == nil {
			parts[p] = &TakeoverPartition{Partition: p}
		}
		return parts[p]
	}
	lower := func(cur, off uint64) uint64 {
		if cur == 0 || off < cur {
			return off
		}
		return cur
	}
	for _, a := range in.BAcks {
		tp := get(a.Partition)
		tp.BFirst = lower(tp.BFirst, a.Offset)
	}
	for _, e := range in.Events {
		switch e.Owner {
		case OwnerB:
			tp := get(e.Partition)
			tp.BFirst = lower(tp.BFirst, e.Offset)
		case OwnerA:
			tp := get(e.Partition)
			tp.AHighestEvent = max(tp.AHighestEvent, e.Offset)
		}
	}
	for _, a := range in.AAcks {
		tp := get(a.Partition)
		tp.AHighestAck = max(tp.AHighestAck, a.Offset)
	}
	var r TakeoverReport
	for _, tp := range parts {
		r.Partitions = append(r.Partitions, *tp)
		if tp.BFirst == 0 && (tp.AHighestAck > 0 || tp.AHighestEvent > 0) {
			r.Unjudged = append(r.Unjudged, tp.Partition)
		}
	}
	slices.SortFunc(r.Partitions, func(a, b TakeoverPartition) int { return cmp.Compare(a.Partition, b.Partition) })
	slices.Sort(r.Unjudged)
	events := slices.Clone(in.Events)
	slices.SortFunc(events, func(a, b OwnedEvent) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	for _, e := range events {
		if f := parts[e.Partition].BFirst; e.Owner == OwnerA && f > 0 && e.Offset >= f {
			r.Violations = append(r.Violations, fmt.Sprintf("partition %d offset %d: an event of A is durable at or above B's first offset %d", e.Partition, e.Offset, f))
		}
	}
	acks := slices.Clone(in.AAcks)
	slices.SortFunc(acks, func(a, b AckOffset) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	for _, a := range acks {
		if f := parts[a.Partition].BFirst; f > 0 && a.Offset >= f {
			r.Violations = append(r.Violations, fmt.Sprintf("partition %d offset %d: A acknowledged a command at or above B's first offset %d", a.Partition, a.Offset, f))
		}
	}
	return r
}

// Summary is one line: per partition A's highest ack and B's first offset.
func (r TakeoverReport) Summary() string {
	var b strings.Builder
	for i, p := range r.Partitions {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "p%d: A's highest ack %d, highest event %d, B's first %d", p.Partition, p.AHighestAck, p.AHighestEvent, p.BFirst)
	}
	return b.String()
}
