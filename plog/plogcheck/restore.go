package plogcheck

import (
	"fmt"

	"github.com/cqlseq/cqlseq/isequencer"
)

// Restored checks the acknowledgements after a restore and `cqlseq
// advance` (after) against those acknowledged after the backup and lost
// with the restore (lost), as bench writes them: every offset of after
// must be above every offset of lost in its partition (Duplicate when it
// was acknowledged before, Regression otherwise), and every number of
// after above every number of lost of its (WSID, SeqID) (Duplicate when
// it was acknowledged before, Regression otherwise). The lost commands'
// events are not looked for: the restore took them.
func Restored(lost, after []Ack) Findings {
	var f Findings
	type place struct {
		part isequencer.PartitionID
		off  isequencer.PLogOffset
	}
	offs := map[place]int{}                                      // lost offset -> its line
	topOff := map[isequencer.PartitionID]place{}                 // per partition, the largest lost offset
	nums := map[isequencer.NumberKey]map[isequencer.Number]int{} // lost number -> its line
	top := map[isequencer.NumberKey]isequencer.Number{}
	for _, a := range lost {
		offs[place{a.Partition, a.Offset}] = a.Line
		if a.Offset > topOff[a.Partition].off {
			topOff[a.Partition] = place{a.Partition, a.Offset}
		}
		for _, n := range a.Numbers {
			k := isequencer.NumberKey{WSID: a.WSID, SeqID: n.SeqID}
			if nums[k] == nil {
				nums[k] = map[isequencer.Number]int{}
			}
			nums[k][n.Number] = a.Line
			top[k] = max(top[k], n.Number)
		}
	}
	for _, a := range after {
		if line, again := offs[place{a.Partition, a.Offset}]; again {
			f.add(Finding{Kind: Duplicate, Partition: a.Partition, Offset: a.Offset, WSID: a.WSID, Line: a.Line, PrevPartition: a.Partition, PrevOffset: a.Offset, PrevLine: line,
				Text: fmt.Sprintf("partition %d offset %d: acknowledged after the restore (line %d) and before it (line %d)", a.Partition, a.Offset, a.Line, line)})
		} else if t := topOff[a.Partition]; a.Offset < t.off {
			f.add(Finding{Kind: Regression, Partition: a.Partition, Offset: a.Offset, WSID: a.WSID, Line: a.Line, PrevPartition: a.Partition, PrevOffset: t.off,
				Text: fmt.Sprintf("partition %d offset %d acknowledged after the restore (line %d) is below offset %d acknowledged before it", a.Partition, a.Offset, a.Line, t.off)})
		}
		for _, n := range a.Numbers {
			k := isequencer.NumberKey{WSID: a.WSID, SeqID: n.SeqID}
			if line, again := nums[k][n.Number]; again {
				f.add(Finding{Kind: Duplicate, Partition: a.Partition, Offset: a.Offset, WSID: a.WSID, SeqID: n.SeqID, Number: n.Number, Line: a.Line, PrevLine: line,
					Text: fmt.Sprintf("WSID %d SeqID %d: number %d acknowledged after the restore (line %d) and before it (line %d)", a.WSID, n.SeqID, n.Number, a.Line, line)})
			} else if n.Number < top[k] {
				f.add(Finding{Kind: Regression, Partition: a.Partition, Offset: a.Offset, WSID: a.WSID, SeqID: n.SeqID, Number: n.Number, Line: a.Line, PrevNumber: top[k],
					Text: fmt.Sprintf("WSID %d SeqID %d: number %d acknowledged after the restore (line %d) is below %d acknowledged before it", a.WSID, n.SeqID, n.Number, a.Line, top[k])})
			}
		}
	}
	return f
}
