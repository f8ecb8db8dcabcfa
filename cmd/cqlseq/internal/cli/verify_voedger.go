package cli

import (
	"context"
	"fmt"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog/voedger"
)

// verifyVoedgerJSON is what verify --plog-format voedger --json writes.
type verifyVoedgerJSON struct {
	Store      string                   `json:"store"`
	PLogFormat string                   `json:"plog_format"`
	OK         bool                     `json:"ok"`
	Partitions []verifyVoedgerPartition `json:"partitions"`
}

type verifyVoedgerPartition struct {
	Partition  uint16           `json:"partition"`
	Events     uint64           `json:"events"`
	First      uint64           `json:"first_offset"`
	Last       uint64           `json:"last_offset"`
	Workspaces int              `json:"workspaces"`
	RecordIDs  uint64           `json:"record_ids"`
	Problems   []voedgerFinding `json:"problems"`
}

type voedgerFinding struct {
	Kind       string `json:"kind"`
	WSID       uint64 `json:"wsid"`
	Offset     uint64 `json:"offset"`
	Value      uint64 `json:"value"`
	PrevOffset uint64 `json:"prev_offset"`
	Prev       uint64 `json:"prev,omitempty"`
}

// scanVerifyVoedger is the verifyScan of the voedger PLog format: each
// partition checked with voedger.Check.
func scanVerifyVoedger(ctx context.Context, e *env, f *verifyFlags, store *openedStore) (any, uint64, error) {
	r, err := voedger.NewReader(store.st, voedger.ReaderOptions{PageTimeout: scanPageTimeout})
	if err != nil {
		return nil, 0, err
	}
	w := e.stdout
	fmt.Fprintf(w, "verify: voedger PLog in %s\n", store.desc)
	out := verifyVoedgerJSON{Store: store.desc, PLogFormat: plogFormatVoedger, OK: true, Partitions: []verifyVoedgerPartition{}}
	var problems uint64
	for _, p := range f.partitions {
		rep, err := voedger.Check(ctx, r, isequencer.PartitionID(p))
		if err != nil {
			return nil, 0, fmt.Errorf("partition %d: %w", p, err)
		}
		fmt.Fprintf(w, "partition %d: %s (offsets %d..%d), %s workspaces, %s record IDs created: ",
			p, plural(rep.Events, "event", "events"), rep.First, rep.Last, commas(uint64(rep.Workspaces)), commas(rep.RecordIDs))
		jp := verifyVoedgerPartition{Partition: uint16(p), Events: rep.Events, First: uint64(rep.First), Last: uint64(rep.Last),
			Workspaces: rep.Workspaces, RecordIDs: rep.RecordIDs, Problems: []voedgerFinding{}}
		if rep.OK() {
			fmt.Fprintln(w, "OK")
		} else {
			fmt.Fprintf(w, "FAILED, %s problems\n", commas(uint64(len(rep.Problems))))
		}
		for _, pr := range rep.Problems {
			fmt.Fprintf(w, "  %s\n", pr)
			jp.Problems = append(jp.Problems, voedgerFinding{Kind: string(pr.Kind), WSID: uint64(pr.WSID), Offset: uint64(pr.Offset),
				Value: pr.Value, PrevOffset: uint64(pr.PrevOffset), Prev: pr.Prev})
		}
		problems += uint64(len(rep.Problems))
		out.OK = out.OK && rep.OK()
		out.Partitions = append(out.Partitions, jp)
	}
	return &out, problems, nil
}
