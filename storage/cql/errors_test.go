package cql

import (
	"fmt"
	"io"
	"testing"

	"github.com/gocql/gocql"
	"github.com/stretchr/testify/assert"
)

func TestServerErrorsAreClassifiedByCode(t *testing.T) {
	// The driver returns overloaded, bootstrapping and other coded errors as
	// its bare error frame: gocql.RequestError (Code, Message) does not match
	// them, GetCode does.
	overloaded := &gocql.UnknownServerError{}
	overloaded.Code = gocql.ErrCodeOverloaded
	assert.True(t, unavailable(overloaded), "an overloaded coordinator: another may answer")
	assert.True(t, replied(overloaded), "an error the server sent is an answer")

	syntax := &gocql.UnknownServerError{}
	syntax.Code = gocql.ErrCodeSyntax
	assert.False(t, unavailable(syntax))
	assert.True(t, replied(syntax))

	assert.False(t, replied(gocql.ErrTimeoutNoResponse))
}

func TestAConnectionClosedUnderARequestIsRetriedElsewhere(t *testing.T) {
	// What verify's read got after the campaign healed a partition:
	// "cql: get batch: EOF (potentially executed: true)".
	for _, err := range []error{io.EOF, io.ErrUnexpectedEOF, fmt.Errorf("get batch: %w", io.EOF)} {
		assert.True(t, unavailable(err), "%v", err)
		assert.Equal(t, gocql.RetryNextHost, idempotentRetry{}.GetRetryType(err), "%v", err)
		assert.False(t, replied(err), "%v", err)
	}
}

func TestOwnedIsACopyAndNeverNull(t *testing.T) {
	buf := []byte("event 1053")
	c := owned(buf)
	copy(buf, "event 1054") // the caller reuses its buffer after the call
	assert.Equal(t, []byte("event 1053"), c, "a late hedge binds what the call was given")
	assert.NotNil(t, owned(nil), "gocql binds a nil slice as null, which deletes the cell")
}
