package cql

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/gocql/gocql"

	"github.com/cqlseq/cqlseq/storage"
)

// fail maps a query error: a closed session to storage.ErrClosed, the
// caller's cancelled or expired ctx to ctx.Err(), the per-query timeout and
// the server's or the connection's unavailability to storage.ErrUnavailable;
// anything else is returned wrapped as is. qctx is the query's context
// (ctx with the per-query timeout).
func (s *Store) fail(ctx, qctx context.Context, op string, err error) error {
	switch {
	case s.closed.Load() || errors.Is(err, gocql.ErrSessionClosed):
		return fmt.Errorf("cql: %s: %w", op, storage.ErrClosed)
	case ctx.Err() != nil:
		return fmt.Errorf("cql: %s: %w", op, ctx.Err())
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
