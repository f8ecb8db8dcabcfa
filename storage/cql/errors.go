package cql

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/gocql/gocql"

	"github.com/cqlseq/cqlseq/storage"
)

// fail maps a query error: a closed session to storage.ErrClosed, the
// caller's cancelled or expired ctx to ctx.Err(), a refused credential,
// permission or TLS handshake to storage.ErrAuthentication,
// ErrAuthorization or ErrTLS (see refused), the per-query timeout and the
// server's or the connection's unavailability to storage.ErrUnavailable;
// anything else is returned wrapped as is. qctx is the query's context
// (ctx with the per-query timeout).
func (s *Store) fail(ctx, qctx context.Context, op string, err error) error {
	switch {
	case s.closed.Load() || errors.Is(err, gocql.ErrSessionClosed):
		return fmt.Errorf("cql: %s: %w", op, storage.ErrClosed)
	case ctx.Err() != nil:
		return fmt.Errorf("cql: %s: %w", op, ctx.Err())
	case refused(err) != nil:
		return fmt.Errorf("cql: %s: %w: %w", op, refused(err), err)
	case qctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("cql: %s: no answer within %v: %w: %w", op, s.o.Timeout, storage.ErrUnavailable, err)
	case unavailable(err):
		return fmt.Errorf("cql: %s: %w: %w", op, storage.ErrUnavailable, err)
	}
	return fmt.Errorf("cql: %s: %w", op, err)
}

// unavailable reports errors after which a later retry may succeed: the
// server could not reach enough replicas in time, is overloaded or starting,
// or the driver has no working connection.
func unavailable(err error) bool {
	var (
		ue *gocql.RequestErrUnavailable
		wt *gocql.RequestErrWriteTimeout
		rt *gocql.RequestErrReadTimeout
		cu *gocql.RequestErrCASWriteUnknown
		re serverError
	)
	switch {
	case errors.As(err, &ue), errors.As(err, &wt), errors.As(err, &rt), errors.As(err, &cu):
		return true
	case errors.As(err, &re):
		c := re.GetCode()
		return c == gocql.ErrCodeOverloaded || c == gocql.ErrCodeBootstrapping || c == gocql.ErrCodeUnavailable ||
			c == gocql.ErrCodeWriteTimeout || c == gocql.ErrCodeReadTimeout || c == gocql.ErrCodeCASWriteUnknown
	}
	for _, e := range []error{
		gocql.ErrNoConnections, gocql.ErrConnectionClosed, gocql.ErrTimeoutNoResponse,
		gocql.ErrNoConnectionsInPool, gocql.ErrUnavailable, gocql.ErrNoConnectionsStarted,
		gocql.ErrSessionNotReady,
		// A connection the node closed with the request in flight (seen
		// after a network partition healed): another host may answer.
		io.EOF, io.ErrUnexpectedEOF,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// serverError is an error frame a node sent. gocql.RequestError names
// Code and Message methods that the driver's error types (which embed its
// error frame) do not have: they have GetCode and GetMessage.
type serverError interface {
	error
	GetCode() int
	GetMessage() string
}

// outcomeUnknown reports whether a conditional write that failed with err
// may nevertheless have been applied: a CAS write timeout or
// CAS_WRITE_UNKNOWN from the server, any other write timeout, or a request
// that was sent but got no answer (connection lost, client timeout, context
// done while in flight).
func outcomeUnknown(err error) bool {
	var cu *gocql.RequestErrCASWriteUnknown
	var wt *gocql.RequestErrWriteTimeout
	var qe *gocql.QueryError
	return errors.As(err, &cu) || errors.As(err, &wt) || errors.As(err, &qe) && qe.PotentiallyExecuted()
}

// refused returns the sentinel of an error no retry can cure, or nil:
//
//   - storage.ErrAuthentication: the server refused the credentials (error
//     code 0x0100, "bad credentials") or asked for credentials none were
//     configured for (gocql's "authentication required");
//   - storage.ErrAuthorization: the role lacks a permission (0x2100,
//     "unauthorized");
//   - storage.ErrTLS: the TLS handshake failed (the server's certificate
//     not verified, an alert from the server, or a server that does not
//     answer in TLS).
//
// Server errors are read by code: gocql returns codes it has no type for
// as its internal ErrorFrame (GetCode), upstream gocql as RequestError
// (Code). Session initialisation flattens its errors into text (seen:
// bad credentials and the TLS handshake's), so those are also recognised
// by the servers', gocql's and crypto/tls's wording.
func refused(err error) error {
	var (
		code int
		fc   interface{ GetCode() int }
		re   gocql.RequestError
		unk  x509.UnknownAuthorityError
		inv  x509.CertificateInvalidError
		host x509.HostnameError
		cv   *tls.CertificateVerificationError
		rh   tls.RecordHeaderError
		al   tls.AlertError
	)
	switch {
	case errors.As(err, &fc):
		code = fc.GetCode()
	case errors.As(err, &re):
		code = re.Code()
	}
	msg := err.Error()
	switch {
	case code == gocql.ErrCodeCredentials, strings.Contains(msg, "authentication required ("),
		strings.Contains(msg, "password are incorrect"): // Cassandra's and Scylla's bad-credentials message
		return storage.ErrAuthentication
	case code == gocql.ErrCodeUnauthorized:
		return storage.ErrAuthorization
	case errors.As(err, &unk), errors.As(err, &inv), errors.As(err, &host), errors.As(err, &cv),
		errors.As(err, &rh), errors.As(err, &al),
		strings.Contains(msg, "tls: "), strings.Contains(msg, "x509: "):
		return storage.ErrTLS
	}
	return nil
}

// connectErr maps the error of a session that could not be initialised:
// refused's sentinels first, else storage.ErrUnavailable. Without TLS, a
// connection the server reset or closed during the handshake gets a hint:
// a node that requires client TLS does exactly that to plain CQL.
func connectErr(hosts string, withTLS bool, err error) error {
	if s := refused(err); s != nil {
		return fmt.Errorf("cql: connecting to %s: %w: %w", hosts, s, trimmed{err})
	}
	msg := err.Error()
	if !withTLS && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(msg, "connection reset by peer") || strings.HasSuffix(strings.TrimSpace(msg), "EOF")) {
		return fmt.Errorf("cql: connecting to %s: %w: %w (the node may require TLS: connect with TLS, cqlseq --tls-ca)", hosts, storage.ErrUnavailable, trimmed{err})
	}
	return fmt.Errorf("cql: connecting to %s: %w: %w", hosts, storage.ErrUnavailable, trimmed{err})
}
