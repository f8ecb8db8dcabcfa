package main

import (
	"context"
	"fmt"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// Example_library is the README's "library API in ten lines": one
// application partition over a store (mem here; boltdb.Open or cql.Open
// in production), and a command that takes two numbers of workspace 42.
func Example_library() {
	ctx := context.Background()
	st := mem.New(mem.Options{}) // or boltdb.Open(path, boltdb.Options{}), cql.Open(ctx, cql.Options{...})
	defer st.Close()
	p, err := apppart.Open(ctx, apppart.OpenOptions{
		Storage: st, Partition: 0, Mode: plog.ModeTrust0,
		SeqTypes: map[isequencer.WSKind]map[isequencer.SeqID]isequencer.Number{1: {1: 1000, 2: 1}},
	})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	cmd := apppart.Command{WSKind: 1, WSID: 42, Seqs: []isequencer.SeqID{1, 2}}
	if err := p.WaitReady(ctx); err != nil { // Open's actualization, bounded by ctx
		panic(err)
	}
	res, err := p.Do(ctx, cmd) // on error: apppart.OutcomeOf(err) says whether the event is stored
	if err != nil {
		panic(err)
	}
	fmt.Println("event at PLog offset", res.Offset, "numbers", res.Numbers)
	// Output: event at PLog offset 1 numbers [1000 1]
}
