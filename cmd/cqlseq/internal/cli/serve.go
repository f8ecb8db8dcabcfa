package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/cqlseq/cqlseq/idservice"
	"github.com/cqlseq/cqlseq/timeshard"
)

type serveFlags struct {
	store           storeFlags
	listen          string
	certFile        string
	keyFile         string
	tokenFile       string
	name            string
	shutdownTimeout time.Duration
	requestTimeout  time.Duration
	probeInterval   time.Duration
	lease           time.Duration
	leaseRetryMax   time.Duration
	maxBody         int64
	pprofListen     string
	leafListen      string
	layoutSpecs     []string                           // --layout NAME=SPEC, as given
	layouts         map[string]idservice.LayoutOptions // parsed by validate
}

func newServeCmd(e *env) *cobra.Command {
	f := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve IDs over HTTP/JSON: galloc sequences, timeshard IDs (63- and 53-bit), UUIDv7s, Leaf's paths",
		Long: `serve runs the ID service (package idservice; docs/service.md describes
the API): named galloc sequences (created by an admin call), timeshard IDs
of the 63-bit and the 53-bit (JavaScript-safe) layouts, UUIDv7s, and
Meituan Leaf's /api/segment/get/KEY and /api/snowflake/get/KEY paths, with
/healthz, /readyz and Prometheus /metrics. The same methods answer gRPC,
gRPC-Web and Connect clients on the same port (docs/service.md, gRPC).

The store is bbolt by default: cqlseq.db in --dir, by default the user's
data directory ($XDG_DATA_HOME/cqlseq, else ~/.local/share/cqlseq), so a
restart continues the sequences. A CQL flag (--hosts, --keyspace) selects
the CQL store; many instances may then serve one keyspace, each leasing its
own timeshard node IDs. A layout none of whose node IDs is free (the 53-bit
one has 32) does not stop the rest: its IDs are answered 503, /readyz says
"degraded", and a node ID is sought again in the background, waits
doubling from --probe-interval up to --lease-retry-max.

--token-file names the bearer tokens: one a line, "issue TOKEN" (take IDs)
or "admin TOKEN" (also create sequences); # starts a comment. Without it
every client may do everything, which the log says at startup.
--http-cert and --http-key serve HTTPS.

--layout NAME=SPEC sets a layout's epoch and bit split (and repeats for
the other layout): "--layout 63=leaf" makes the 63-bit layout, and so
Leaf's /api/snowflake/get/KEY, Meituan Leaf's: twepoch 1288834974657 ms
(2010-11-04T01:42:54.657Z), 41 time / 10 worker / 12 sequence bits, each
millisecond's sequence starting at a random 0..99. SPEC is comma-separated
items applied in order: a preset (cqlseq, leaf), epoch=TIME (RFC 3339 or
Unix milliseconds), bits=T/N/C, random-start=N (0: none); for example
"63=epoch=2020-01-01T00:00:00Z" or "63=leaf,random-start=0". The store
records each layout: a start whose IDs could repeat or sort before IDs
already made (a later epoch, fewer bits) is refused (docs/service.md).

--leaf-listen ADDR also serves Leaf's paths and monitor pages (with
/healthz and /readyz, nothing else) on ADDR without a token, for Leaf's
clients, which send none; the --listen API keeps wanting the tokens of
--token-file. Whoever reaches ADDR can take IDs and read the sequences'
names and state (not create or change a sequence): bind it to an internal
address.

SIGINT or SIGTERM shuts down gracefully: no new connections, the requests
in flight finish (at most --shutdown-timeout), then the node leases are
released so that another instance can take the node IDs at once.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return usage(err)
			}
			log := e.log
			if !cmd.Flags().Changed("log-level") {
				l, err := newLogger(e.stderr, "info")
				if err != nil {
					return err
				}
				log = l
			}
			return runServe(cmd.Context(), f, log)
		},
	}
	fs := cmd.Flags()
	f.store.addKind(fs)
	f.store.addBolt(fs, "bbolt: directory of "+boltFileName+" (default: $XDG_DATA_HOME/cqlseq, else ~/.local/share/cqlseq)")
	f.store.cluster.add(fs)
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to serve on, host:port")
	fs.StringVar(&f.certFile, "http-cert", "", "serve HTTPS with this PEM certificate (chain) file; needs --http-key")
	fs.StringVar(&f.keyFile, "http-key", "", "the PEM private key of --http-cert")
	fs.StringVar(&f.tokenFile, "token-file", "", `bearer tokens, one a line: "issue TOKEN" or "admin TOKEN" (default: no authentication)`)
	fs.StringVar(&f.name, "name", idservice.DefaultName, "name of the ID space: the timeshard generators are NAME/63 and NAME/53; instances serving one ID space share it")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", idservice.DefaultShutdownTimeout, "how long a shutdown waits for the requests in flight")
	fs.DurationVar(&f.requestTimeout, "request-timeout", idservice.DefaultRequestTimeout, "bound on one request's work (waiting for a chunk, a store call)")
	fs.DurationVar(&f.probeInterval, "probe-interval", idservice.DefaultProbeInterval, "how often the store and the node leases are checked for /readyz, and the open sequences for a retirement")
	fs.DurationVar(&f.lease, "lease", timeshard.DefaultLeaseDuration, "timeshard node lease TTL, whole seconds; a crashed instance's node IDs are free again after it")
	fs.DurationVar(&f.leaseRetryMax, "lease-retry-max", idservice.DefaultLeaseRetryMax, "longest wait between attempts to lease a node ID of a layout that has none (all leased, or the store failing)")
	fs.Int64Var(&f.maxBody, "max-body", idservice.DefaultMaxBodyBytes, "largest request body, bytes")
	fs.StringArrayVar(&f.layoutSpecs, "layout", nil, `a layout's epoch and split, NAME=SPEC: "63=leaf" (Meituan Leaf's), "63=epoch=2020-01-01T00:00:00Z,bits=41/10/12,random-start=100"; repeatable`)
	fs.StringVar(&f.leafListen, "leaf-listen", "", "also serve Leaf's paths and monitor pages (only) on this address, host:port, without a token")
	fs.StringVar(&f.pprofListen, "pprof-listen", "", "serve net/http/pprof's /debug/pprof/ on this address (make bench-service's profiles); never on the API's address")
	_ = fs.MarkHidden("pprof-listen")
	return cmd
}

func (f *serveFlags) validate() error {
	errs := []error{f.store.validate()}
	if (f.certFile == "") != (f.keyFile == "") {
		errs = append(errs, errors.New("--http-cert and --http-key go together"))
	}
	if _, _, err := net.SplitHostPort(f.listen); err != nil {
		errs = append(errs, fmt.Errorf("--listen %q: want host:port", f.listen))
	}
	if len(f.name) == 0 || len(f.name)+4 > timeshard.MaxNameLen {
		errs = append(errs, fmt.Errorf("--name %q: want 1..%d bytes", f.name, timeshard.MaxNameLen-4))
	}
	ts := timeshard.Options{LeaseDuration: f.lease}
	ts.EnsureDefaults()
	if err := ts.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--lease %v: %w", f.lease, err))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--shutdown-timeout", f.shutdownTimeout}, {"--request-timeout", f.requestTimeout}, {"--probe-interval", f.probeInterval}, {"--lease-retry-max", f.leaseRetryMax}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %v: must be > 0", d.name, d.v))
		}
	}
	if f.maxBody <= 0 {
		errs = append(errs, fmt.Errorf("--max-body %d: must be > 0", f.maxBody))
	}
	if f.leafListen != "" {
		if _, _, err := net.SplitHostPort(f.leafListen); err != nil {
			errs = append(errs, fmt.Errorf("--leaf-listen %q: want host:port", f.leafListen))
		} else if f.leafListen == f.listen {
			errs = append(errs, fmt.Errorf("--leaf-listen %q: the same address as --listen; want another", f.leafListen))
		}
	}
	f.layouts = map[string]idservice.LayoutOptions{}
	for _, spec := range f.layoutSpecs {
		name, rest, ok := strings.Cut(spec, "=")
		if !ok {
			errs = append(errs, fmt.Errorf("--layout %q: want NAME=SPEC, such as 63=leaf", spec))
			continue
		}
		if _, dup := f.layouts[name]; dup {
			errs = append(errs, fmt.Errorf("--layout %q: layout %s given twice", spec, name))
			continue
		}
		lo, err := idservice.ParseLayout(name, rest, time.Now())
		if err != nil {
			errs = append(errs, fmt.Errorf("--layout %q: %w", spec, err))
			continue
		}
		f.layouts[name] = lo
	}
	return errors.Join(errs...)
}

// options returns the service's options of the flags (without store,
// tokens and logger).
func (f *serveFlags) options() idservice.Options {
	return idservice.Options{
		Name:            f.name,
		Timeshard:       timeshard.Options{LeaseDuration: f.lease},
		MaxBodyBytes:    f.maxBody,
		RequestTimeout:  f.requestTimeout,
		ShutdownTimeout: f.shutdownTimeout,
		ProbeInterval:   f.probeInterval,
		Layouts:         f.layouts,
		LeaseRetryMax:   f.leaseRetryMax,
	}
}

// defaultDataDir is serve's bbolt directory when none is given:
// $XDG_DATA_HOME/cqlseq, else ~/.local/share/cqlseq.
func defaultDataDir() (string, error) {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "cqlseq"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no data directory (give --dir): %w", err)
	}
	return filepath.Join(home, ".local", "share", "cqlseq"), nil
}

func runServe(ctx context.Context, f *serveFlags, log *slog.Logger) error {
	o := f.options()
	o.Logger = log
	if f.tokenFile != "" {
		t, err := idservice.ReadTokens(f.tokenFile)
		if err != nil {
			return err
		}
		o.Tokens = t
		log.Info("serve: bearer tokens read", "file", f.tokenFile, "issue", t.Count(idservice.ScopeIssue), "admin", t.Count(idservice.ScopeAdmin))
	} else {
		log.Warn("serve: no --token-file: no authentication, every client may take IDs and create sequences")
	}
	var tlsConf *tls.Config
	if f.certFile != "" {
		cert, err := tls.LoadX509KeyPair(f.certFile, f.keyFile)
		if err != nil {
			return fmt.Errorf("--http-cert/--http-key: %w", err)
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if f.store.kind == storeBolt && f.store.boltPath() == "" {
		dir, err := defaultDataDir()
		if err != nil {
			return err
		}
		f.store.dir = dir
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	defer ln.Close() // Serve closes it; this covers the failures before it
	var leafLn net.Listener
	if f.leafListen != "" {
		leafLn, err = net.Listen("tcp", f.leafListen)
		if err != nil {
			return fmt.Errorf("--leaf-listen: %w", err)
		}
		defer leafLn.Close() // ServeLeaf closes it; this covers the failures before it
	}
	store, err := f.store.open(ctx, log, false)
	if err != nil {
		return err
	}
	defer func() {
		if err := store.close(); err != nil {
			log.Error("serve: closing the store", "err", err)
		}
	}()
	log.Info("serve: store open", "store", store.desc)
	o.Store = store.st
	if f.pprofListen != "" {
		if err := servePprof(ctx, f.pprofListen, log); err != nil {
			return err
		}
	}
	svc, err := idservice.New(ctx, o)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return svc.Serve(gctx, ln, tlsConf) })
	if leafLn != nil {
		log.Warn("serve: --leaf-listen: Leaf's paths and monitor pages without a token", "addr", leafLn.Addr().String())
		g.Go(func() error { return svc.ServeLeaf(gctx, leafLn, tlsConf) })
	}
	serr := g.Wait()
	if err := svc.Close(); err != nil {
		log.Warn("serve: releasing the node leases (they expire by their TTL)", "err", err)
	}
	log.Info("serve: stopped")
	return serr
}

// servePprof serves net/http/pprof on addr, apart from the API, until ctx
// is done (the hidden --pprof-listen flag).
func servePprof(ctx context.Context, addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	log.Info("serve: pprof", "addr", ln.Addr().String())
	return nil
}
