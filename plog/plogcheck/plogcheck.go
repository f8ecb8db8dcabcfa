// Package plogcheck decides what is wrong with a PLog and the numbers
// stored beside it: it defines every finding kind once, checks a
// partition's PLog against its stored numbers (Partition) and an
// acknowledgement log against the PLog (Acks), and reads and writes the
// acknowledgement log (bench --ack-log). Its reports are typed and
// marshal to JSON; the CLI only prints them, tests and the fault campaign
// read them.
package plogcheck

import (
	"errors"
	"fmt"

	"github.com/cqlseq/cqlseq/isequencer"
)

// Kind is what a finding says is wrong. The zero Kind is not a finding.
type Kind uint8

// Finding kinds.
const (
	// Duplicate: a number of one (WSID, SeqID) was issued twice. In a
	// partition's PLog, an event carries the number an earlier event of
	// that (WSID, SeqID) carried (the largest so far). In an ack log, one
	// (partition, offset) is acknowledged twice (with the same numbers or
	// not: an event lost and written again in its place), or two commands
	// acknowledged at different places got the same number of one (WSID,
	// SeqID), in one partition or in two.
	Duplicate Kind = iota + 1
	// Backwards: in a partition's PLog, an event carries a number of a
	// (WSID, SeqID) below the largest an earlier event of it carried: a
	// number reused or issued out of order.
	Backwards
	// Regression: a number went back where it must not. In a partition, a
	// stored number is below a number of its (WSID, SeqID) that an event
	// below the stored next offset carries: that event is flushed, a
	// restart does not replay it and would issue the number again. In an
	// ack log, a number acknowledged at a higher offset of a partition is
	// below one of the same (WSID, SeqID) acknowledged at a lower offset.
	Regression
	// OffsetBeyondLog: a partition's stored next PLog offset is more than
	// one past its last event (the PLog read from offset 1 to its first
	// missing offset): the events between are missing.
	OffsetBeyondLog
	// Lost: an acknowledged command whose event the PLog (read from offset
	// 1 to its first missing offset, as a restart reads it) does not hold
	// at its offset as acknowledged: no event there, or one of another
	// workspace, with other numbers (the largest per SeqID on both sides),
	// or, where the acknowledgement knows it, another payload.
	Lost
	// LostRecord: an acknowledged command whose event is in the PLog as
	// acknowledged, and one of whose record IDs (its numbers of the record
	// sequences) has no record row, or a row that names another offset. A
	// command whose event is lost is reported once, as Lost.
	LostRecord
)

var kindNames = [...]string{
	Duplicate:       "duplicate",
	Backwards:       "backwards",
	Regression:      "regression",
	OffsetBeyondLog: "offset",
	Lost:            "lost",
	LostRecord:      "lost record",
}

// Kinds returns every finding kind, in the order they are declared.
func Kinds() []Kind {
	return []Kind{Duplicate, Backwards, Regression, OffsetBeyondLog, Lost, LostRecord}
}

// String returns the kind's name as reports print it ("duplicate",
// "lost record", ...).
func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// MarshalText implements encoding.TextMarshaler: the kind's String. JSON
// reports carry kinds by name, also as map keys.
func (k Kind) MarshalText() ([]byte, error) {
	if int(k) >= len(kindNames) || kindNames[k] == "" {
		return nil, fmt.Errorf("plogcheck: unknown finding kind %d", uint8(k))
	}
	return []byte(kindNames[k]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler. A name no kind has
// is an error.
func (k *Kind) UnmarshalText(b []byte) error {
	for i, n := range kindNames {
		if n != "" && n == string(b) {
			*k = Kind(i)
			return nil
		}
	}
	return fmt.Errorf("plogcheck: unknown finding kind %q", b)
}

// Finding is one problem a check found. Which fields are set depends on
// the kind and the check; unset fields are zero.
type Finding struct {
	Kind Kind `json:"kind"`
	// Partition and Offset name the event or acknowledged command found
	// wrong (for an ack log Duplicate, the later of the two). For
	// OffsetBeyondLog, Offset is the stored next offset; for a partition's
	// Regression, the flushed event that carries Number.
	Partition isequencer.PartitionID `json:"partition"`
	Offset    isequencer.PLogOffset  `json:"offset,omitempty"`
	// WSID, SeqID and Number are the number found wrong. Lost names only
	// the WSID; LostRecord's Number is the record ID and SeqID its
	// sequence.
	WSID   isequencer.WSID   `json:"wsid,omitempty"`
	SeqID  isequencer.SeqID  `json:"seq_id,omitempty"`
	Number isequencer.Number `json:"number,omitempty"`
	// PrevPartition, PrevOffset and PrevNumber are what it conflicts
	// with: the earlier event or acknowledgement and its number (for
	// OffsetBeyondLog, PrevOffset is the last event's offset).
	PrevPartition isequencer.PartitionID `json:"prev_partition,omitempty"`
	PrevOffset    isequencer.PLogOffset  `json:"prev_offset,omitempty"`
	PrevNumber    isequencer.Number      `json:"prev_number,omitempty"`
	// Stored is, for a partition's Regression, the stored number below
	// Number.
	Stored isequencer.Number `json:"stored,omitempty"`
	// Line and PrevLine are the ack log lines of an ack log's findings
	// (0: none, or not known).
	Line     int `json:"line,omitempty"`
	PrevLine int `json:"prev_line,omitempty"`
	// Text says it in one sentence, without the kind.
	Text string `json:"text"`
}

// String returns "kind: text".
func (f Finding) String() string { return f.Kind.String() + ": " + f.Text }

// MaxListed is how many findings of each kind a report lists; the others
// are only counted.
const MaxListed = 20

// Findings counts a check's findings by kind and lists the first
// MaxListed of each kind, in the order they were found.
type Findings struct {
	Problems uint64          `json:"problems"` // findings, all kinds
	ByKind   map[Kind]uint64 `json:"by_kind,omitempty"`
	Listed   []Finding       `json:"listed,omitempty"`
}

// OK reports whether nothing was found.
func (f *Findings) OK() bool { return f.Problems == 0 }

// Count returns the findings of the given kinds.
func (f *Findings) Count(kinds ...Kind) uint64 {
	var n uint64
	for _, k := range kinds {
		n += f.ByKind[k]
	}
	return n
}

// Unlisted returns how many findings are counted and not listed.
func (f *Findings) Unlisted() uint64 {
	var listed uint64
	for _, n := range f.ByKind {
		listed += min(n, MaxListed)
	}
	return f.Problems - listed
}

func (f *Findings) add(fd Finding) {
	f.Problems++
	if f.ByKind == nil {
		f.ByKind = map[Kind]uint64{}
	}
	f.ByKind[fd.Kind]++
	if f.ByKind[fd.Kind] <= MaxListed {
		f.Listed = append(f.Listed, fd)
	}
}

// Report is a whole check: the partitions' reports and the ack log's, as
// cqlseq verify --json writes it.
type Report struct {
	// OK is set by whoever assembles the report: no finding in any part.
	// A report read back is judged by Passed, which checks the counts too.
	OK         bool               `json:"ok"`
	Partitions []*PartitionReport `json:"partitions"`
	Acks       *AckReport         `json:"acks,omitempty"`
}

// Problems returns the findings of every part, all kinds.
func (r *Report) Problems() uint64 {
	return r.parts(func(f *Findings) uint64 { return f.Problems })
}

// Count returns the findings of the given kinds in every part.
func (r *Report) Count(kinds ...Kind) uint64 {
	return r.parts(func(f *Findings) uint64 { return f.Count(kinds...) })
}

// Passed reports whether the report says OK and counts no finding.
func (r *Report) Passed() bool { return r.OK && r.Problems() == 0 }

func (r *Report) parts(fn func(*Findings) uint64) uint64 {
	var n uint64
	for _, p := range r.Partitions {
		n += fn(&p.Findings)
	}
	if r.Acks != nil {
		n += fn(&r.Acks.Findings)
	}
	return n
}

// ErrInvalidOptions wraps every problem a check finds in its options.
var ErrInvalidOptions = errors.New("plogcheck: invalid options")
