package idservice

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Serve serves the API on ln (over TLS when tlsConf is not nil) until ctx
// is done, then shuts down gracefully: it stops accepting, /readyz answers
// 503 to requests already accepted, and the requests in flight finish, for
// at most Options.ShutdownTimeout; those still running then are cut off
// and Serve returns an error. Serve closes ln; it does not close the
// Service (Close releases the node leases after Serve has returned).
//
// It speaks HTTP/1.1 and HTTP/2, which gRPC needs: over TLS, HTTP/2 is
// negotiated by ALPN (an empty tlsConf.NextProtos is taken as h2 and
// http/1.1; tlsConf itself is not modified); without TLS, HTTP/2 is h2c
// with prior knowledge, beside HTTP/1.1.
func (s *Service) Serve(ctx context.Context, ln net.Listener, tlsConf *tls.Config) error {
	return s.serve1(ctx, ln, tlsConf, s.Handler(), "api", s.o.Tokens != nil)
}

// ServeLeaf serves LeafHandler (Leaf's paths and monitor pages, /healthz
// and /readyz, without tokens) on ln, as Serve serves the API: until ctx
// is done, then gracefully. An instance may run Serve and ServeLeaf at
// once, on two listeners; Close it after both have returned.
func (s *Service) ServeLeaf(ctx context.Context, ln net.Listener, tlsConf *tls.Config) error {
	return s.serve1(ctx, ln, tlsConf, s.LeafHandler(), "leaf", false)
}

// serve1 serves h on ln (Serve's contract); what and auth are logged.
func (s *Service) serve1(ctx context.Context, ln net.Listener, tlsConf *tls.Config, h http.Handler, what string, auth bool) error {
	var protos http.Protocols
	protos.SetHTTP1(true)
	if tlsConf != nil {
		protos.SetHTTP2(true)
		if len(tlsConf.NextProtos) == 0 {
			tlsConf = tlsConf.Clone()
			tlsConf.NextProtos = []string{"h2", "http/1.1"}
		}
		ln = tls.NewListener(ln, tlsConf)
	} else {
		protos.SetUnencryptedHTTP2(true)
	}
	srv := &http.Server{
		Handler:           h,
		Protocols:         &protos,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	scheme := "http"
	if tlsConf != nil {
		scheme = "https"
	}
	s.log.Info("idservice: serving", "what", what, "addr", ln.Addr().String(), "scheme", scheme, "auth", auth)
	select {
	case err := <-errc:
		return fmt.Errorf("idservice: serving %s: %w", what, err)
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.log.Info("idservice: shutting down", "what", what, "timeout", s.o.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), s.o.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		_ = srv.Close()
		err = fmt.Errorf("idservice: shutdown: requests still in flight after %v were cut off: %w", s.o.ShutdownTimeout, err)
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
