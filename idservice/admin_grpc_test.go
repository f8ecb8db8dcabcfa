package idservice_test

import (
	"context"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v1 "github.com/cqlseq/cqlseq/idservice/gen/idservicev1"
)

// TestGRPCListAlterRetire: ListSequences pages, AlterSequence and
// RetireSequence want an admin token, and a retired sequence is
// FAILED_PRECONDITION sequence_retired on NextSequence, AlterSequence and
// CreateSequence.
func TestGRPCListAlterRetire(t *testing.T) {
	o := testOptions(nil)
	o.Tokens = tokens(t)
	s := start(t, o, nil)
	c := grpcClient(t, s, nil)
	ctx := context.Background()
	for _, n := range []string{"b", "a", "c"} {
		_, err := c.CreateSequence(ctx, req(&v1.CreateSequenceRequest{Name: n, ChunkSize: 4, Adaptive: n == "c"}, adminToken))
		require.NoError(t, err)
	}
	p, err := c.ListSequences(ctx, req(&v1.ListSequencesRequest{Limit: n32(2)}, issueToken))
	require.NoError(t, err)
	require.Len(t, p.Msg.GetSequences(), 2)
	assert.Equal(t, "a", p.Msg.GetSequences()[0].GetName())
	assert.Equal(t, "b", p.Msg.GetNextAfter())
	p, err = c.ListSequences(ctx, req(&v1.ListSequencesRequest{After: "b"}, issueToken))
	require.NoError(t, err)
	require.Len(t, p.Msg.GetSequences(), 1)
	assert.True(t, p.Msg.GetSequences()[0].GetAdaptive())
	assert.Empty(t, p.Msg.GetNextAfter())
	_, err = c.ListSequences(ctx, req(&v1.ListSequencesRequest{Limit: n32(0)}, issueToken))
	requireCode(t, err, connect.CodeInvalidArgument, "bad_request")

	_, err = c.AlterSequence(ctx, req(&v1.AlterSequenceRequest{Name: "a", ChunkSize: i64(9)}, issueToken))
	requireCode(t, err, connect.CodePermissionDenied, "forbidden")
	_, err = c.AlterSequence(ctx, req(&v1.AlterSequenceRequest{Name: "a"}, adminToken))
	requireCode(t, err, connect.CodeInvalidArgument, "invalid_definition")
	_, err = c.AlterSequence(ctx, req(&v1.AlterSequenceRequest{Name: "zz", ChunkSize: i64(9)}, adminToken))
	requireCode(t, err, connect.CodeNotFound, "unknown_sequence")
	ad := true
	a, err := c.AlterSequence(ctx, req(&v1.AlterSequenceRequest{Name: "a", ChunkSize: i64(9), Adaptive: &ad}, adminToken))
	require.NoError(t, err)
	assert.Equal(t, int64(9), a.Msg.GetSequence().GetChunkSize())
	assert.True(t, a.Msg.GetSequence().GetAdaptive())

	_, err = c.NextSequence(ctx, req(&v1.NextSequenceRequest{Name: "b", Count: n32(3)}, issueToken))
	require.NoError(t, err)
	_, err = c.RetireSequence(ctx, req(&v1.RetireSequenceRequest{Name: "b"}, issueToken))
	requireCode(t, err, connect.CodePermissionDenied, "forbidden")
	r, err := c.RetireSequence(ctx, req(&v1.RetireSequenceRequest{Name: "b"}, adminToken))
	require.NoError(t, err)
	assert.True(t, r.Msg.GetSequence().GetRetired())
	_, err = c.NextSequence(ctx, req(&v1.NextSequenceRequest{Name: "b"}, issueToken))
	requireCode(t, err, connect.CodeFailedPrecondition, "sequence_retired")
	_, err = c.AlterSequence(ctx, req(&v1.AlterSequenceRequest{Name: "b", ChunkSize: i64(9)}, adminToken))
	requireCode(t, err, connect.CodeFailedPrecondition, "sequence_retired")
	_, err = c.CreateSequence(ctx, req(&v1.CreateSequenceRequest{Name: "b", ChunkSize: 4}, adminToken))
	requireCode(t, err, connect.CodeFailedPrecondition, "sequence_retired")
	_, err = c.RetireSequence(ctx, req(&v1.RetireSequenceRequest{Name: "b"}, adminToken))
	require.NoError(t, err, "retiring again is not an error")
	g, err := c.GetSequence(ctx, req(&v1.GetSequenceRequest{Name: "b"}, issueToken))
	require.NoError(t, err)
	assert.True(t, g.Msg.GetSequence().GetRetired())
}
