package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/cqlseq/cqlseq/galloc"
)

type inspectGallocFlags struct {
	store storeFlags
	json  bool
}

// newInspectGallocCmd is "inspect galloc NAME": a galloc sequence's
// allocation record, as BDR's bdr.sequence_alloc shows it.
func newInspectGallocCmd(e *env) *cobra.Command {
	f := &inspectGallocFlags{}
	cmd := &cobra.Command{
		Use:   "galloc NAME",
		Short: "Show a galloc sequence's allocation record (chunk size, allocated up to, allocations, last allocation, process)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("inspect galloc takes one sequence name, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.store.validate(); err != nil {
				return usage(err)
			}
			return runInspectGalloc(cmd.Context(), e, f, args[0])
		},
	}
	fs := cmd.Flags()
	f.store.addKind(fs)
	f.store.addBoltReadOnly(fs, "bbolt: directory of "+boltFileName)
	f.store.cluster.add(fs)
	fs.BoolVar(&f.json, "json", false, "print the record as JSON")
	return cmd
}

// gallocRecord is the JSON form of a record.
type gallocRecord struct {
	Sequence      string    `json:"sequence"`
	Type          string    `json:"type"`
	ChunkSize     int64     `json:"chunk_size"`
	Start         int64     `json:"start"`
	Step          int64     `json:"step"`
	Allocated     uint64    `json:"allocated_values"`
	AllocatedUpTo *int64    `json:"allocated_up_to"` // null once exhausted
	Allocations   uint64    `json:"allocations"`
	LastAlloc     time.Time `json:"last_allocation"`
	Process       string    `json:"process"`
	Exhausted     bool      `json:"exhausted"`
	Adaptive      bool      `json:"adaptive"`
	Retired       bool      `json:"retired"`
}

func runInspectGalloc(ctx context.Context, e *env, f *inspectGallocFlags, name string) (err error) {
	store, err := f.store.open(ctx, e.log, true)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, store.close()) }()
	r, ok, err := galloc.ReadRecord(ctx, store.st, name)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("galloc sequence %q: not found in %s", name, store.desc)
	}
	j := gallocRecord{Sequence: name, Type: r.Type.String(), ChunkSize: r.ChunkSize, Start: r.Start, Step: r.Step,
		Allocated: r.Allocated, Allocations: r.Allocations, LastAlloc: r.LastAlloc, Process: r.Process, Exhausted: r.Exhausted(),
		Adaptive: r.Adaptive, Retired: r.Retired}
	if v, ok := r.AllocatedUpTo(); ok {
		j.AllocatedUpTo = &v
	}
	w := e.stdout
	if f.json {
		b, err := json.MarshalIndent(j, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	fmt.Fprintf(w, "inspect galloc: %s\n", store.desc)
	fmt.Fprintf(w, "%-18s%s\n", "sequence", name)
	fmt.Fprintf(w, "%-18s%v, start %d, step %d\n", "type", r.Type, r.Start, r.Step)
	chunk := commas(uint64(r.ChunkSize))
	if r.Adaptive {
		chunk += " (adaptive: each process doubles it up to " + commas(galloc.MaxAdaptiveChunkSize) + " while chunks last under 15 min)"
	}
	fmt.Fprintf(w, "%-18s%s\n", "chunk size", chunk)
	if r.Retired {
		fmt.Fprintf(w, "%-18s%s\n", "retired", "yes: no more chunks are allocated, the name is never created again")
	}
	if j.AllocatedUpTo != nil {
		fmt.Fprintf(w, "%-18s%d (the next chunk starts there; %s values allocated)\n", "allocated up to", *j.AllocatedUpTo, commas(r.Allocated))
	} else {
		fmt.Fprintf(w, "%-18sexhausted (all %s values allocated)\n", "allocated up to", commas(r.Allocated))
	}
	fmt.Fprintf(w, "%-18s%s\n", "allocations", commas(r.Allocations))
	last := "none"
	if !r.LastAlloc.IsZero() {
		last = r.LastAlloc.UTC().Format(time.RFC3339Nano)
	}
	fmt.Fprintf(w, "%-18s%s\n", "last allocation", last)
	fmt.Fprintf(w, "%-18s%s\n", "by process", r.Process)
	return nil
}
