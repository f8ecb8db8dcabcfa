package seqstorage_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/seqstorage"
)

func TestNewVoedgerValidates(t *testing.T) {
	_, err := seqstorage.NewVoedger(seqstorage.VoedgerOptions{Timeout: -1})
	require.ErrorIs(t, err, seqstorage.ErrInvalidOptions)
	assert.Contains(t, err.Error(), "PLog is nil")
	assert.Contains(t, err.Error(), "Timeout -1ns")
}
