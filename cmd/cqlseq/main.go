// Command cqlseq runs the demo, benchmarks a store, applies the CQL schema,
// and inspects or verifies a partition's event log. Run cqlseq --help.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/cqlseq/cqlseq/cmd/cqlseq/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
