package idservice

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/cqlseq/cqlseq/galloc"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/timeshard"
)

// Sentinel errors; compare with errors.Is.
var (
	// ErrInvalidOptions: Options.Validate found a bad field. It wraps
	// storage.ErrInvalidArgument.
	ErrInvalidOptions = fmt.Errorf("idservice: invalid options: %w", storage.ErrInvalidArgument)

	// ErrInvalidTokens: a token file that does not parse.
	ErrInvalidTokens = errors.New("idservice: invalid token file")

	// ErrUnknownSequence: no sequence of that name exists in the store.
	ErrUnknownSequence = errors.New("idservice: unknown sequence")

	// ErrClosed: the Service was closed.
	ErrClosed = errors.New("idservice: service closed")
)

// Code is an error's stable code in the JSON error body
// {"code": "...", "message": "..."}; docs/service.md lists them.
type Code string

// Error codes, with the HTTP status each is answered with.
const (
	CodeBadRequest         Code = "bad_request"         // 400: a malformed request (query, body)
	CodeInvalidCount       Code = "invalid_count"       // 400: count not 1..MaxCount
	CodeInvalidName        Code = "invalid_name"        // 400: a name too long, empty or with bytes outside [A-Za-z0-9._-]
	CodeInvalidID          Code = "invalid_id"          // 400: an ID to decompose that is not one of the layout's
	CodeInvalidDefinition  Code = "invalid_definition"  // 400: a sequence definition galloc rejects
	CodeUnauthenticated    Code = "unauthenticated"     // 401: no or an unknown bearer token
	CodeForbidden          Code = "forbidden"           // 403: the token lacks the route's scope
	CodeNotFound           Code = "not_found"           // 404: no such route
	CodeUnknownSequence    Code = "unknown_sequence"    // 404
	CodeUnknownLayout      Code = "unknown_layout"      // 404
	CodeMethodNotAllowed   Code = "method_not_allowed"  // 405
	CodeDefinitionMismatch Code = "definition_mismatch" // 409: the sequence exists with another definition
	CodeExhausted          Code = "sequence_exhausted"  // 409: every value of the sequence's type is allocated
	CodeRetired            Code = "sequence_retired"    // 410: the sequence was retired (next, alter, create of its name)
	CodeBodyTooLarge       Code = "body_too_large"      // 413
	CodeUnavailable        Code = "unavailable"         // 503: the store is unreachable or slow; retry
	CodeNoNodeLease        Code = "no_node_lease"       // 503: the timeshard node lease is not held; retry
	CodeClock              Code = "clock"               // 503: the clock went back too far or is outside the layout
	CodeShuttingDown       Code = "shutting_down"       // 503
	CodeInternal           Code = "internal"            // 500
)

// apiError is an error answered to a client.
type apiError struct {
	status  int
	code    Code
	message string
	// exception is the Java exception class a Leaf monitor page names in
	// its error body (writeLeafError); "": Leaf's LeafServerException.
	exception string
}

func (e *apiError) Error() string { return string(e.code) + ": " + e.message }

func newError(status int, code Code, format string, a ...any) *apiError {
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, a...)}
}

// classify turns an error of the service's work into what the client is
// answered.
func classify(err error) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, ErrUnknownSequence):
		return newError(http.StatusNotFound, CodeUnknownSequence, "%v", err)
	case errors.Is(err, galloc.ErrRetired):
		return newError(http.StatusGone, CodeRetired, "%v", err)
	case errors.Is(err, galloc.ErrExhausted):
		return newError(http.StatusConflict, CodeExhausted, "%v: every value of its type is allocated", err)
	case errors.Is(err, galloc.ErrDefinitionMismatch):
		return newError(http.StatusConflict, CodeDefinitionMismatch, "%v", err)
	case errors.Is(err, ErrClosed), errors.Is(err, galloc.ErrClosed), errors.Is(err, timeshard.ErrClosed):
		return newError(http.StatusServiceUnavailable, CodeShuttingDown, "the service is shutting down")
	case errors.Is(err, timeshard.ErrLeaseLost), errors.Is(err, timeshard.ErrNoNode), errors.Is(err, errNoGenerator):
		return newError(http.StatusServiceUnavailable, CodeNoNodeLease, "%v", err)
	case errors.Is(err, timeshard.ErrClockBackwards), errors.Is(err, timeshard.ErrTimeRange):
		return newError(http.StatusServiceUnavailable, CodeClock, "%v", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, storage.ErrUnavailable), errors.Is(err, storage.ErrUnknownOutcome),
		errors.Is(err, storage.ErrClosed), errors.Is(err, galloc.ErrContention):
		return newError(http.StatusServiceUnavailable, CodeUnavailable, "%v", err)
	}
	return newError(http.StatusInternalServerError, CodeInternal, "%v", err)
}
