package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogcheck"
	"github.com/cqlseq/cqlseq/storage"
)

// printAcks prints an ack log check's findings.
func printAcks(w io.Writer, path string, r *plogcheck.AckReport) {
	fmt.Fprintf(w, "acks %s: %s acknowledged commands in %s", path, commas(uint64(r.Acks)), plural(uint64(r.Partitions), "partition", "partitions"))
	if r.Torn > 0 {
		fmt.Fprintf(w, " (a torn last line of %d bytes ignored)", r.Torn)
	}
	if r.OK() {
		fmt.Fprintf(w, ": OK, 0 lost, 0 duplicates, 0 regressions, 0 lost records (%s record rows checked)\n", commas(uint64(r.Records)))
		return
	}
	fmt.Fprintf(w, ": FAILED, %d lost, %d duplicates, %d regressions, %d lost records\n",
		r.Count(plogcheck.Lost), r.Count(plogcheck.Duplicate), r.Count(plogcheck.Regression), r.Count(plogcheck.LostRecord))
	for _, f := range r.Listed {
		fmt.Fprintf(w, "  %s\n", f)
	}
}

// startAckLog opens bench's ack log, saying on stderr if it cut a torn
// line.
func startAckLog(e *env, path string, rep *benchReport) (*plogcheck.AckLogWriter, error) {
	al, cut, err := plogcheck.OpenAckLog(path, fmt.Sprintf("cqlseq bench pid %d: %s, mode %s, app %d, %d partitions",
		os.Getpid(), rep.Store, rep.Mode, rep.App, rep.Partitions))
	if err != nil {
		return nil, err
	}
	if cut > 0 {
		fmt.Fprintf(e.stderr, "ack log %s: cut a torn last line of %d bytes (a write a crash cut short; its command was never counted)\n", path, cut)
	}
	return al, nil
}

// verifyAcks reads the ack log at path, checks it against st and prints
// the findings.
func verifyAcks(ctx context.Context, e *env, st storage.Storage, path string) (*plogcheck.AckReport, error) {
	log, err := plogcheck.ReadAckLog(path)
	if err != nil {
		return nil, err
	}
	rd, err := plog.NewReader(st, plog.ReaderOptions{PageTimeout: scanPageTimeout})
	if err != nil {
		return nil, err
	}
	r, err := plogcheck.Acks(ctx, rd, log, plogcheck.AckOptions{RecordSeqs: []isequencer.SeqID{seqRecords}, Records: st})
	if err != nil {
		return nil, fmt.Errorf("checking ack log %s: %w", path, err)
	}
	printAcks(e.stdout, path, r)
	return r, nil
}
