// Package galloccheck decides whether the IDs a galloc sequence handed out
// are correct: every ID handed out once, by any process (unique), each
// goroutine's IDs increasing, and each process's chunks increasing
// (galloc's guarantees). A Recorder per goroutine keeps the IDs it
// received as runs of consecutive IDs, so that a check takes memory for
// the chunks, not for the IDs; Check and Duplicates judge the runs of
// every goroutine of every process together. cqlseq alloc prints the
// result; tests call it directly.
package galloccheck

import (
	"cmp"
	"math"
	"slices"

	"github.com/cqlseq/cqlseq/galloc"
)

// MaxListed is how many ranges of duplicated IDs Duplicates and Check
// list; the others are only counted.
const MaxListed = 20

// Run is a run of consecutive IDs: First, First+1, ..., Last (First <=
// Last).
type Run struct{ First, Last int64 }

// Len returns how many IDs the run holds.
func (r Run) Len() uint64 { return uint64(r.Last-r.First) + 1 }

// Recorder records the IDs one goroutine received, in the order it
// received them. An ID one above the one before extends the last run, so
// a goroutine drawing from a sequence of Step 1 keeps one run per chunk
// it drew from (with a larger Step every ID is a run of its own). The
// zero Recorder is empty and ready to use; it is not safe for concurrent
// use: one per goroutine.
type Recorder struct {
	runs      []Run
	ids       uint64
	backwards bool
}

// Add records id, the next ID the goroutine received.
func (r *Recorder) Add(id int64) {
	r.ids++
	if k := len(r.runs); k > 0 {
		last := &r.runs[k-1] // its Last is the ID received before id
		if id <= last.Last {
			r.backwards = true
		}
		if id == last.Last+1 {
			last.Last = id
			return
		}
	}
	r.runs = append(r.runs, Run{id, id})
}

// Runs returns the recorded runs, in the order they were received. The
// slice is the Recorder's: the caller must not modify it, and an Add may
// change its last element.
func (r *Recorder) Runs() []Run { return r.runs }

// IDs returns how many IDs were recorded.
func (r *Recorder) IDs() uint64 { return r.ids }

// Monotonic reports whether every ID recorded is larger than the one
// recorded before it; true for a Recorder with fewer than two IDs.
func (r *Recorder) Monotonic() bool { return !r.backwards }

// Report is what Check found in the IDs of a set of Recorders.
type Report struct {
	IDs        uint64 `json:"ids"`        // IDs recorded, in all
	Duplicates uint64 `json:"duplicates"` // as Duplicates counts them: 0 when every ID is unique
	Listed     []Run  `json:"listed,omitempty"`
	Monotonic  bool   `json:"monotonic"` // every Recorder's IDs increase
}

// OK reports whether r found nothing wrong: no duplicates, every
// Recorder's IDs increasing.
func (r Report) OK() bool { return r.Duplicates == 0 && r.Monotonic }

// Check judges the IDs recorded by recs, one Recorder per goroutine, of
// one process or of many (galloc hands no ID out twice across processes):
// every ID must be recorded once (Duplicates), and each Recorder's IDs
// must increase (Recorder.Monotonic). It does not modify recs.
func Check(recs []Recorder) Report {
	rep := Report{Monotonic: true}
	var all []Run
	for i := range recs {
		rep.IDs += recs[i].IDs()
		rep.Monotonic = rep.Monotonic && recs[i].Monotonic()
		all = append(all, recs[i].Runs()...)
	}
	rep.Duplicates, rep.Listed = Duplicates(all)
	return rep
}

// Duplicates returns how many IDs of runs were handed out more than once
// (the runs of every goroutine of every process, in any order), and the
// first MaxListed ranges of them in increasing order. An ID covered by k
// runs counts k-1 times and is in k-1 listed ranges, so the listed ranges'
// lengths add up to n when none is left out. It does not modify runs.
func Duplicates(runs []Run) (n uint64, listed []Run) {
	sorted := slices.Clone(runs)
	slices.SortFunc(sorted, func(a, b Run) int { return cmp.Compare(a.First, b.First) })
	reach := int64(math.MinInt64) // the largest Last so far
	for i, r := range sorted {
		if i > 0 && r.First <= reach {
			again := Run{r.First, min(r.Last, reach)}
			n += again.Len()
			if len(listed) < MaxListed {
				listed = append(listed, again)
			}
		}
		reach = max(reach, r.Last)
	}
	return n, listed
}

// ChunksIncrease reports whether cs, the chunks one process allocated in
// the order it allocated them (galloc.Sequence.Chunks), are in order of
// their first values.
func ChunksIncrease(cs []galloc.Chunk) bool {
	return slices.IsSortedFunc(cs, func(a, b galloc.Chunk) int { return cmp.Compare(a.First, b.First) })
}
