package torture

import (
	"encoding/json"
	"fmt"
)

// Verdict is what the campaign takes from cqlseq verify --json.
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

// verifyReport is the part of verify's JSON report the campaign reads.
type verifyReport struct {
	OK         bool `json:"ok"`
	Partitions []struct {
		Problems uint64            `json:"problems"`
		ByKind   map[string]uint64 `json:"by_kind"`
	} `json:"partitions"`
	Acks *struct {
		Acks     int               `json:"acks"`
		Problems uint64            `json:"problems"`
		ByKind   map[string]uint64 `json:"by_kind"`
	} `json:"acks"`
}

// ParseVerdict reads verify's JSON report. The report's own "ok" decides:
// a finding of a kind the campaign does not name still fails it.
func ParseVerdict(b []byte) (Verdict, error) {
	var r verifyReport
	if err := json.Unmarshal(b, &r); err != nil {
		return Verdict{}, fmt.Errorf("torture: verify's JSON report: %w", err)
	}
	v := Verdict{OK: r.OK}
	add := func(problems uint64, byKind map[string]uint64) {
		v.Problems += problems
		v.Lost += byKind["lost"]
		v.Duplicates += byKind["duplicate"] + byKind["backwards"]
		v.Regressions += byKind["regression"]
	}
	for _, p := range r.Partitions {
		add(p.Problems, p.ByKind)
	}
	if r.Acks != nil {
		v.Acks = r.Acks.Acks
		add(r.Acks.Problems, r.Acks.ByKind)
	}
	if v.Problems > 0 {
		v.OK = false
	}
	return v, nil
}
