package idservice

import (
	"context"
	"net/http"

	"connectrpc.com/connect"

	v1 "github.com/cqlseq/cqlseq/idservice/gen/idservicev1"
)

// The gRPC methods of admin.go's routes, as grpc.go's: the same
// validation, scopes, Service methods and metrics.

// Their route labels in the request metrics.
const (
	grpcRouteList   = "grpc_sequence_list"
	grpcRouteAlter  = "grpc_sequence_alter"
	grpcRouteRetire = "grpc_sequence_retire"
)

// ListSequences is GET /v1/sequences: limit absent is DefaultListLimit.
func (a grpcAPI) ListSequences(ctx context.Context, req *connect.Request[v1.ListSequencesRequest]) (*connect.Response[v1.ListSequencesResponse], error) {
	return unary(ctx, a.s, grpcRouteList, ScopeIssue, req, func(ctx context.Context, m *v1.ListSequencesRequest) (*v1.ListSequencesResponse, error) {
		limit := DefaultListLimit
		if m.Limit != nil {
			limit = int(m.GetLimit())
			if limit < 1 || limit > DefaultListLimit {
				return nil, newError(http.StatusBadRequest, CodeBadRequest, "limit %d: want a whole number from 1 to %d", m.GetLimit(), DefaultListLimit)
			}
		}
		if m.GetAfter() != "" {
			if err := validateName(m.GetAfter()); err != nil {
				return nil, err
			}
		}
		views, next, err := a.s.List(ctx, m.GetAfter(), limit)
		if err != nil {
			return nil, err
		}
		out := &v1.ListSequencesResponse{NextAfter: next, Sequences: make([]*v1.Sequence, 0, len(views))}
		for _, v := range views {
			out.Sequences = append(out.Sequences, sequenceMessage(v))
		}
		return out, nil
	})
}

// AlterSequence is PATCH /v1/sequences/{name}.
func (a grpcAPI) AlterSequence(ctx context.Context, req *connect.Request[v1.AlterSequenceRequest]) (*connect.Response[v1.AlterSequenceResponse], error) {
	return unary(ctx, a.s, grpcRouteAlter, ScopeAdmin, req, func(ctx context.Context, m *v1.AlterSequenceRequest) (*v1.AlterSequenceResponse, error) {
		if err := validateName(m.GetName()); err != nil {
			return nil, err
		}
		c, err := alterRequest{ChunkSize: m.ChunkSize, Adaptive: m.Adaptive}.change()
		if err != nil {
			return nil, err
		}
		v, err := a.s.Alter(ctx, m.GetName(), c)
		if err != nil {
			return nil, err
		}
		return &v1.AlterSequenceResponse{Sequence: sequenceMessage(v)}, nil
	})
}

// RetireSequence is DELETE /v1/sequences/{name}.
func (a grpcAPI) RetireSequence(ctx context.Context, req *connect.Request[v1.RetireSequenceRequest]) (*connect.Response[v1.RetireSequenceResponse], error) {
	return unary(ctx, a.s, grpcRouteRetire, ScopeAdmin, req, func(ctx context.Context, m *v1.RetireSequenceRequest) (*v1.RetireSequenceResponse, error) {
		if err := validateName(m.GetName()); err != nil {
			return nil, err
		}
		v, err := a.s.Retire(ctx, m.GetName())
		if err != nil {
			return nil, err
		}
		return &v1.RetireSequenceResponse{Sequence: sequenceMessage(v)}, nil
	})
}
