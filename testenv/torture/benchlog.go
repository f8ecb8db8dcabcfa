package torture

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Messages of cqlseq bench's log (--log-level info) that BenchLog counts.
const (
	msgUnknown  = "cql: conditional write outcome unknown"
	msgDecided  = "cql: conditional write outcome decided by serial re-read"
	msgTakeover = "apppart: took over partition"
)

// BenchLog is what one cqlseq bench process logged (its stderr at
// --log-level info).
type BenchLog struct {
	// Unknown counts conditional writes whose outcome stayed unknown;
	// Decided those whose unknown outcome a SERIAL re-read decided
	// (applied). Both are attempts whose outcome the client did not learn.
	Unknown, Decided int
	// Takeovers are the fenced takeovers it made.
	Takeovers []TakeoverLog
}

// UnknownOutcomes is every conditional write whose attempt ended without
// an answer: Unknown + Decided.
func (b BenchLog) UnknownOutcomes() int { return b.Unknown + b.Decided }

// TakeoverLog is one logged takeover: the partition and the epoch the
// process believes it owns.
type TakeoverLog struct {
	Partition uint16
	Epoch     uint64
}

// ScanBenchLog reads a bench's log (slog's text format). Lines it does not
// know are skipped.
func ScanBenchLog(r io.Reader) (BenchLog, error) {
	var b BenchLog
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.Contains(l, msgUnknown):
			b.Unknown++
		case strings.Contains(l, msgDecided):
			b.Decided++
		case strings.Contains(l, msgTakeover):
			p, perr := strconv.ParseUint(field(l, "partition"), 10, 16)
			e, eerr := strconv.ParseUint(field(l, "epoch"), 10, 64)
			if perr != nil || eerr != nil {
				return b, fmt.Errorf("torture: a takeover line without partition and epoch: %q", l)
			}
			b.Takeovers = append(b.Takeovers, TakeoverLog{Partition: uint16(p), Epoch: e})
		}
	}
	return b, sc.Err()
}

// field returns the value of key=value in an slog text line ("" if absent).
func field(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

// SharedEpochs returns the takeovers that two owners running at once both
// made at the same epoch of the same partition: fencing promises each
// epoch one owner, so every one is a violation.
func SharedEpochs(a, b []TakeoverLog) []TakeoverLog {
	var out []TakeoverLog
	for _, x := range a {
		if slices.Contains(b, x) && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	slices.SortFunc(out, func(x, y TakeoverLog) int {
		return cmp.Or(cmp.Compare(x.Partition, y.Partition), cmp.Compare(x.Epoch, y.Epoch))
	})
	return out
}

// ContestedPartitions counts the partitions that both owners took over.
func ContestedPartitions(a, b []TakeoverLog) int {
	n := 0
	seen := map[uint16]bool{}
	for _, x := range a {
		if seen[x.Partition] {
			continue
		}
		if slices.ContainsFunc(b, func(y TakeoverLog) bool { return y.Partition == x.Partition }) {
			seen[x.Partition] = true
			n++
		}
	}
	return n
}
