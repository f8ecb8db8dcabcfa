package plogcheck

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
)

// AckOptions configure Acks.
type AckOptions struct {
	// RecordSeqs are the sequences whose numbers are record IDs: every
	// such number of an acknowledged command whose event is present must
	// have its record row in Records, naming the command's offset. Empty:
	// no record row is checked.
	RecordSeqs []isequencer.SeqID
	// Records is the storage of the record rows; required with
	// RecordSeqs.
	Records storage.Storage
}

// AckReport is what Acks found.
type AckReport struct {
	Acks       int `json:"acks"`       // acknowledged commands checked
	Torn       int `json:"torn_bytes"` // bytes of the ack log's torn last line (ignored)
	Partitions int `json:"partitions"` // partitions acknowledged in
	Records    int `json:"records"`    // record rows checked
	Findings
}

// recordBatch bounds the record rows of one GetBatch.
const recordBatch = 1024

// Acks checks every acknowledged command of log against the PLog rd reads
// and, with o.RecordSeqs, against the record rows of o.Records. The
// acknowledgements are one application's (as bench writes them): their
// numbers belong to (WSID, SeqID) whatever the partition. It reports
//
//   - Lost: an acknowledged event not in the PLog as acknowledged;
//   - LostRecord: a record row missing or naming another offset;
//   - Duplicate: an offset acknowledged twice, or a number acknowledged by
//     two commands at different places;
//   - Regression: a number acknowledged at a higher offset of a partition
//     below one at a lower offset.
//
// See the kinds for the precise rules. An error is a read that failed;
// findings are never errors.
func Acks(ctx context.Context, rd plog.PLogReader, log *AckLog, o AckOptions) (*AckReport, error) {
	switch {
	case rd == nil:
		return nil, fmt.Errorf("%w: PLog reader is nil", ErrInvalidOptions)
	case len(o.RecordSeqs) > 0 && o.Records == nil:
		return nil, fmt.Errorf("%w: RecordSeqs without Records", ErrInvalidOptions)
	}
	r := &AckReport{Acks: len(log.Acks), Torn: log.Torn}
	byPart := map[isequencer.PartitionID][]*Ack{}
	for i := range log.Acks {
		a := &log.Acks[i]
		byPart[a.Partition] = append(byPart[a.Partition], a)
	}
	r.Partitions = len(byPart)
	var present []*Ack // acks whose event the PLog holds as acknowledged
	for _, part := range slices.Sorted(maps.Keys(byPart)) {
		acks := byPart[part]
		payloads := slices.ContainsFunc(acks, func(a *Ack) bool { return a.Payload != nil })
		events := map[isequencer.PLogOffset]plog.Event{}
		err := rd.ReadEvents(ctx, part, 1, func(e *plog.Event) error {
			ev := plog.Event{WSID: e.WSID, Numbers: largestPerSeq(nil, e.Numbers)}
			if payloads {
				ev.Payload = bytes.Clone(e.Payload)
			}
			events[e.Offset] = ev
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("plogcheck: partition %d: %w", part, err)
		}
		present = r.checkPartition(part, acks, events, present)
	}
	r.checkDuplicates(log.Acks)
	if len(o.RecordSeqs) > 0 {
		if err := r.checkRecords(ctx, o.Records, present, o.RecordSeqs); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// checkPartition reports the lost events and the regressions among one
// partition's acks, and returns present with the acks whose event the PLog
// holds as acknowledged appended.
func (r *AckReport) checkPartition(part isequencer.PartitionID, acks []*Ack, events map[isequencer.PLogOffset]plog.Event, present []*Ack) []*Ack {
	type pt struct {
		off isequencer.PLogOffset
		n   isequencer.Number
	}
	byKey := map[isequencer.NumberKey][]pt{}
	for _, a := range acks {
		e, ok := events[a.Offset]
		lost := Finding{Kind: Lost, Partition: part, Offset: a.Offset, WSID: a.WSID, Line: a.Line}
		switch {
		case !ok:
			lost.Text = fmt.Sprintf("partition %d offset %d (ack log line %d): acknowledged, not in the PLog", part, a.Offset, a.Line)
			r.add(lost)
		case e.WSID != a.WSID || !sameNumbers(e.Numbers, a.Numbers):
			lost.Text = fmt.Sprintf("partition %d offset %d (ack log line %d): acknowledged WSID %d %v, the PLog holds WSID %d %v",
				part, a.Offset, a.Line, a.WSID, a.Numbers, e.WSID, e.Numbers)
			r.add(lost)
		case a.Payload != nil && !bytes.Equal(a.Payload, e.Payload):
			lost.Text = fmt.Sprintf("partition %d offset %d (ack log line %d): acknowledged a payload of %d bytes (%.16q), the PLog holds another of %d bytes (%.16q)",
				part, a.Offset, a.Line, len(a.Payload), a.Payload, len(e.Payload), e.Payload)
			r.add(lost)
		default:
			present = append(present, a)
		}
		for _, n := range a.Numbers {
			k := isequencer.NumberKey{WSID: a.WSID, SeqID: n.SeqID}
			byKey[k] = append(byKey[k], pt{a.Offset, n.Number})
		}
	}
	// Per key, numbers ordered by offset must increase.
	keys := slices.SortedFunc(maps.Keys(byKey), func(a, b isequencer.NumberKey) int {
		return cmp.Or(cmp.Compare(a.WSID, b.WSID), cmp.Compare(a.SeqID, b.SeqID))
	})
	for _, k := range keys {
		pts := byKey[k]
		slices.SortFunc(pts, func(a, b pt) int { return cmp.Or(cmp.Compare(a.off, b.off), cmp.Compare(a.n, b.n)) })
		for i := 1; i < len(pts); i++ {
			if pts[i].off != pts[i-1].off && pts[i].n < pts[i-1].n {
				r.add(Finding{Kind: Regression, Partition: part, Offset: pts[i].off, WSID: k.WSID, SeqID: k.SeqID, Number: pts[i].n,
					PrevPartition: part, PrevOffset: pts[i-1].off, PrevNumber: pts[i-1].n,
					Text: fmt.Sprintf("partition %d WSID %d SeqID %d: number %d acknowledged at offset %d is below %d at offset %d",
						part, k.WSID, k.SeqID, pts[i].n, pts[i].off, pts[i-1].n, pts[i-1].off)})
			}
		}
	}
	return present
}

// checkDuplicates reports every (partition, offset) acknowledged more
// than once, and every number of a (WSID, SeqID) acknowledged by two
// commands at different places, across all partitions.
func (r *AckReport) checkDuplicates(acks []Ack) {
	type place struct {
		part isequencer.PartitionID
		off  isequencer.PLogOffset
	}
	type seen struct {
		place
		line int
	}
	byOffset := map[place]int{} // the first line that acknowledged it
	byNumber := map[isequencer.NumberKey]map[isequencer.Number]seen{}
	for i := range acks {
		a := &acks[i]
		at := place{a.Partition, a.Offset}
		if first, dup := byOffset[at]; dup {
			r.add(Finding{Kind: Duplicate, Partition: a.Partition, Offset: a.Offset, WSID: a.WSID, Line: a.Line,
				PrevPartition: a.Partition, PrevOffset: a.Offset, PrevLine: first,
				Text: fmt.Sprintf("partition %d offset %d: acknowledged twice (ack log lines %d and %d)", a.Partition, a.Offset, first, a.Line)})
			continue // its numbers are that offset's: reported once, here
		}
		byOffset[at] = a.Line
		for _, n := range a.Numbers {
			k := isequencer.NumberKey{WSID: a.WSID, SeqID: n.SeqID}
			m := byNumber[k]
			if m == nil {
				m = map[isequencer.Number]seen{}
				byNumber[k] = m
			}
			if prev, dup := m[n.Number]; dup {
				r.add(Finding{Kind: Duplicate, Partition: a.Partition, Offset: a.Offset, WSID: k.WSID, SeqID: k.SeqID, Number: n.Number, Line: a.Line,
					PrevPartition: prev.part, PrevOffset: prev.off, PrevNumber: n.Number, PrevLine: prev.line,
					Text: fmt.Sprintf("WSID %d SeqID %d: number %d acknowledged at partition %d offset %d (line %d) and at partition %d offset %d (line %d)",
						k.WSID, k.SeqID, n.Number, prev.part, prev.off, prev.line, a.Partition, a.Offset, a.Line)})
				continue
			}
			m[n.Number] = seen{at, a.Line}
		}
	}
}

// checkRecords reports every record ID of acks (their numbers of
// recordSeqs) whose record row in st is missing or names another offset.
func (r *AckReport) checkRecords(ctx context.Context, st storage.Storage, acks []*Ack, recordSeqs []isequencer.SeqID) error {
	type want struct {
		a   *Ack
		seq isequencer.SeqID
		id  plog.RecordID
	}
	byPKey := map[string][]want{}
	for _, a := range acks {
		for _, n := range a.Numbers {
			if slices.Contains(recordSeqs, n.SeqID) {
				id := plog.RecordID(n.Number)
				pk := string(plog.RecordPKey(a.WSID, id))
				byPKey[pk] = append(byPKey[pk], want{a, n.SeqID, id})
			}
		}
	}
	for _, pk := range slices.Sorted(maps.Keys(byPKey)) {
		ws := byPKey[pk]
		for len(ws) > 0 {
			chunk := ws[:min(len(ws), recordBatch)]
			ws = ws[len(chunk):]
			items := make([]storage.GetItem, len(chunk))
			for i, w := range chunk {
				items[i].CCols = plog.RecordCCols(w.id)
			}
			if err := st.GetBatch(ctx, []byte(pk), items); err != nil {
				return fmt.Errorf("plogcheck: reading record rows: %w", err)
			}
			for i, w := range chunk {
				r.Records++
				a := w.a
				f := Finding{Kind: LostRecord, Partition: a.Partition, Offset: a.Offset, WSID: a.WSID, SeqID: w.seq, Number: isequencer.Number(w.id), Line: a.Line}
				switch {
				case !items[i].Ok:
					f.Text = fmt.Sprintf("partition %d offset %d (ack log line %d): record %d of WSID %d is not stored", a.Partition, a.Offset, a.Line, w.id, a.WSID)
					r.add(f)
				case !bytes.Equal(items[i].Value, plog.RecordValue(a.Offset)):
					f.Text = fmt.Sprintf("partition %d offset %d (ack log line %d): record %d of WSID %d names offset %s", a.Partition, a.Offset, a.Line, w.id, a.WSID, recordOffset(items[i].Value))
					r.add(f)
				}
			}
		}
	}
	return nil
}

// recordOffset formats a record row's value: the offset it names.
func recordOffset(v []byte) string {
	if len(v) != 8 {
		return fmt.Sprintf("? (a value of %d bytes)", len(v))
	}
	return strconv.FormatUint(binary.BigEndian.Uint64(v), 10)
}

// sameNumbers reports whether event (already one entry per SeqID) holds
// the numbers of acked, the largest per SeqID, in any order.
func sameNumbers(event, acked []plog.SeqNumber) bool {
	acked = largestPerSeq(nil, acked)
	if len(event) != len(acked) {
		return false
	}
	for _, n := range acked {
		if !slices.Contains(event, n) {
			return false
		}
	}
	return true
}
