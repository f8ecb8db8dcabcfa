package torture

import (
	"encoding/json"
	"fmt"

	"github.com/cqlseq/cqlseq/plog/plogcheck"
)

// Verdict is what the campaign takes from cqlseq verify --json: its
// table's counts, from plogcheck's report.
type Verdict struct {
	OK bool
	// Lost, Duplicates and Regressions count the findings of those kinds,
	// in the ack log's check and in the PLog scan ("backwards" numbers
	// count as duplicates: a number handed out again, out of order).
	Lost, Duplicates, Regressions uint64
	// Problems is every finding, of any kind.
	Problems uint64
	// Acks is the ack log's acknowledged commands (0 without --acks).
	Acks int
}

// ParseVerdict reads verify's JSON report into a plogcheck.Report and
// takes its verdict: Report.Passed decides, so a finding of a kind the
// table has no column for still fails the campaign.
func ParseVerdict(b []byte) (Verdict, error) {
	var r plogcheck.Report
	if err := json.Unmarshal(b, &r); err != nil {
		return Verdict{}, fmt.Errorf("torture: verify's JSON report: %w", err)
	}
	v := Verdict{
		OK:          r.Passed(),
		Lost:        r.Count(plogcheck.Lost),
		Duplicates:  r.Count(plogcheck.Duplicate, plogcheck.Backwards),
		Regressions: r.Count(plogcheck.Regression),
		Problems:    r.Problems(),
	}
	if r.Acks != nil {
		v.Acks = r.Acks.Acks
	}
	return v, nil
}
