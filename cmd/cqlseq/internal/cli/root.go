// Package cli is the cqlseq command: demo, bench, migrate, inspect, verify,
// alloc, actualize, advance, serve, plot and version. Main runs it in-process (the tests do) with the caller's
// arguments, output streams and context.
//
// Exit codes: 0 success, 1 a runtime failure (unreachable store, failed
// verification, conflict), 2 a usage error (bad flag, unknown command),
// 130 interrupted. Every failure is one line on stderr, "cqlseq: ...".
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes of Main.
const (
	ExitOK          = 0
	ExitFailure     = 1
	ExitUsage       = 2
	ExitInterrupted = 130
)

// usageError marks a bad command line: exit code 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// usage marks err (possibly an errors.Join of several) as a usage error.
func usage(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

// env is what every command shares: the output streams and the global
// flags.
type env struct {
	stdout, stderr io.Writer
	tty            bool // stderr is a terminal: progress bars are drawn
	logLevel       string
	noProgress     bool
	log            *slog.Logger
}

// Main runs cqlseq with args (without the program name) and returns the
// exit code. ctx cancelled (Ctrl-C) stops a running demo or bench cleanly.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return run(ctx, args, &env{stdout: stdout, stderr: stderr, tty: isTerminal(stderr)})
}

// run is Main with a prepared env (tests set tty).
func run(ctx context.Context, args []string, e *env) int {
	stderr := e.stderr
	if name, ok := unknownCommand(e, args); ok {
		// cobra would print the root's help for "NAME --help" and succeed.
		fmt.Fprintf(stderr, "cqlseq: unknown command %q (run 'cqlseq --help')\n", name)
		return ExitUsage
	}
	root := newRoot(e)
	root.SetArgs(args)
	root.SetOut(e.stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code := ExitFailure
	var ue usageError
	switch {
	case errors.As(err, &ue):
		code = ExitUsage
	case ctx.Err() != nil:
		code = ExitInterrupted
		if errors.Is(err, context.Canceled) {
			err = errors.New("interrupted")
		} else {
			err = fmt.Errorf("interrupted: %w", err)
		}
	}
	fmt.Fprintf(stderr, "cqlseq: %s\n", oneLine(err))
	return code
}

// unknownCommand reports the first positional argument of args when it names
// no command (on a throwaway root, whose flags args may set).
func unknownCommand(e *env, args []string) (string, bool) {
	root := newRoot(e)
	root.InitDefaultHelpCmd()
	if c, _, err := root.Find(args); err == nil && c != root {
		return "", false
	}
	root.InitDefaultHelpFlag()
	if root.ParseFlags(args) != nil || len(root.Flags().Args()) == 0 {
		return "", false
	}
	return root.Flags().Args()[0], true
}

// oneLine joins the lines of err's message (errors.Join) with "; ".
func oneLine(err error) string {
	lines := strings.FieldsFunc(err.Error(), func(r rune) bool { return r == '\n' || r == '\r' })
	return strings.Join(lines, "; ")
}

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "cqlseq",
		Short: "Per-workspace sequence numbers, durable in Cassandra/ScyllaDB or bbolt",
		Long: `cqlseq hands out per-workspace sequence numbers for event-sourced platforms.
This command runs a demo, benchmarks a store (bench), applies the CQL schema
(migrate), inspects or verifies a partition's event log (PLog) and stored
numbers, writes a partition's numbers from its PLog (actualize), moves the
numbers and offsets past a restored backup (advance), allocates galloc
ranges (alloc), runs the ID service over HTTP/JSON and gRPC (serve), draws
a recorded run's timeline again (plot) and prints its version.

Exit codes: 0 ok, 1 failure, 2 usage error, 130 interrupted.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q (run 'cqlseq --help')", args[0])
			}
			return nil
		},
		RunE: func(*cobra.Command, []string) error {
			return usagef("no command given (run 'cqlseq --help')")
		},
		PersistentPreRunE: func(*cobra.Command, []string) error {
			l, err := newLogger(e.stderr, e.logLevel)
			if err != nil {
				return usage(err)
			}
			e.log = l
			return nil
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usage(err) })
	pf := root.PersistentFlags()
	pf.StringVar(&e.logLevel, "log-level", "error", "log level of library messages on stderr: debug, info, warn, error")
	pf.BoolVar(&e.noProgress, "no-progress", false, "no progress bar (it is shown only when stderr is a terminal)")
	root.AddCommand(newDemoCmd(e), newBenchCmd(e), newMigrateCmd(e), newInspectCmd(e), newVerifyCmd(e))
	root.AddCommand(newAllocCmd(e), newActualizeCmd(e), newAdvanceCmd(e), newPlotCmd(e))
	root.AddCommand(newServeCmd(e), newVersionCmd(e))
	return root
}

func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", cmd.CommandPath(), args)
	}
	return nil
}
