package idservice

import (
	"context"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/cqlseq/cqlseq/idservice/gen/idservicev1"
	"github.com/cqlseq/cqlseq/idservice/gen/idservicev1/idservicev1connect"
)

// The gRPC API (idservice/proto/cqlseq/idservice/v1/idservice.proto) is a
// Connect handler on the HTTP API's mux: it answers gRPC, gRPC-Web and
// Connect clients. Each method runs what the HTTP route of the same work
// runs: the same token check (authorizeHeader), the same validation
// (validateName, checkCount, layoutNamed, createRequest.definition,
// decompose), the same Service methods and the same request metrics, under
// the route labels of grpcRoutes. Errors are classify's, answered as the
// gRPC code grpcCodes maps their stable code to, with the code in the
// message ("invalid_count: ...") and in an ErrorDetail.

// grpcAPI implements the generated IDServiceHandler over a Service.
type grpcAPI struct{ s *Service }

var _ idservicev1connect.IDServiceHandler = grpcAPI{}

// The gRPC methods' route labels in the request metrics.
const (
	grpcRouteCreate    = "grpc_sequence_create"
	grpcRouteGet       = "grpc_sequence_get"
	grpcRouteNext      = "grpc_sequence_next"
	grpcRouteLayouts   = "grpc_layouts"
	grpcRouteTimeshard = "grpc_timeshard_next"
	grpcRouteDecompose = "grpc_timeshard_decompose"
	grpcRouteUUIDs     = "grpc_uuid_next"

	// grpcRouteNotFound labels every request under the service's path
	// prefix that names no method of it, whatever the path: the label's
	// values stay bounded.
	grpcRouteNotFound = "grpc_not_found"
)

// grpcProcedures are the paths of the service's methods
// ("/cqlseq.idservice.v1.IDService/NextSequence", ...), read from the
// generated descriptor so that they follow make proto.
var grpcProcedures = func() map[string]bool {
	out := map[string]bool{}
	ss := v1.File_cqlseq_idservice_v1_idservice_proto.Services()
	for i := range ss.Len() {
		if sd := ss.Get(i); string(sd.FullName()) == idservicev1connect.IDServiceName {
			for j := range sd.Methods().Len() {
				out["/"+idservicev1connect.IDServiceName+"/"+string(sd.Methods().Get(j).Name())] = true
			}
		}
	}
	return out
}()

// grpcHandler returns the gRPC API's path prefix and handler. A request
// message above Options.MaxBodyBytes is refused by Connect itself
// (RESOURCE_EXHAUSTED) before any method runs, and is not counted in the
// request metrics. A path under the prefix that is no method of the
// service (grpcProcedures) is answered as every unknown route: 404 with
// the API's JSON not_found error, counted under grpcRouteNotFound (gRPC
// clients read an HTTP 404 as UNIMPLEMENTED, Connect clients the JSON
// body's code as NOT_FOUND).
func (s *Service) grpcHandler() (string, http.Handler) {
	prefix, h := idservicev1connect.NewIDServiceHandler(grpcAPI{s: s}, connect.WithReadMaxBytes(int(s.o.MaxBodyBytes)))
	notFound := s.wrap(route{name: grpcRouteNotFound, h: func(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
		return newError(http.StatusNotFound, CodeNotFound, "no route %s %s: the service %s has no such method",
			r.Method, r.URL.Path, idservicev1connect.IDServiceName)
	}})
	return prefix, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !grpcProcedures[r.URL.Path] {
			notFound.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// grpcCodes maps each stable error code to the gRPC code it is answered
// with; a code missing here is answered INTERNAL.
var grpcCodes = map[Code]connect.Code{
	CodeBadRequest:         connect.CodeInvalidArgument,
	CodeInvalidCount:       connect.CodeInvalidArgument,
	CodeInvalidName:        connect.CodeInvalidArgument,
	CodeInvalidID:          connect.CodeInvalidArgument,
	CodeInvalidDefinition:  connect.CodeInvalidArgument,
	CodeUnauthenticated:    connect.CodeUnauthenticated,
	CodeForbidden:          connect.CodePermissionDenied,
	CodeNotFound:           connect.CodeUnimplemented,
	CodeUnknownSequence:    connect.CodeNotFound,
	CodeUnknownLayout:      connect.CodeNotFound,
	CodeMethodNotAllowed:   connect.CodeUnimplemented,
	CodeDefinitionMismatch: connect.CodeAlreadyExists,
	CodeExhausted:          connect.CodeResourceExhausted,
	CodeRetired:            connect.CodeFailedPrecondition,
	CodeBodyTooLarge:       connect.CodeResourceExhausted,
	CodeUnavailable:        connect.CodeUnavailable,
	CodeNoNodeLease:        connect.CodeUnavailable,
	CodeClock:              connect.CodeUnavailable,
	CodeShuttingDown:       connect.CodeUnavailable,
	CodeInternal:           connect.CodeInternal,
}

// grpcError is ae as a gRPC status: grpcCodes' code, the message
// "CODE: message", and an ErrorDetail with the stable code.
func grpcError(ae *apiError) *connect.Error {
	code, ok := grpcCodes[ae.code]
	if !ok {
		code = connect.CodeInternal
	}
	e := connect.NewError(code, ae)
	if d, err := connect.NewErrorDetail(&v1.ErrorDetail{Code: string(ae.code)}); err == nil {
		e.AddDetail(d)
	}
	return e
}

// unary runs one gRPC call of route wanting scope, as wrap runs an HTTP
// request: it checks the bearer token of the call's metadata, bounds f's
// work by Options.RequestTimeout, answers f's error as grpcError of its
// classification, and records the request metrics with, as the code
// label, the HTTP status the HTTP API answers the same outcome with (200
// on success).
func unary[Req, Res any](ctx context.Context, s *Service, route string, scope Scope, req *connect.Request[Req],
	f func(ctx context.Context, m *Req) (*Res, error)) (*connect.Response[Res], error) {
	began := time.Now()
	res, err := func() (*Res, error) {
		if ae := s.o.Tokens.authorizeHeader(req.Header(), scope); ae != nil {
			return nil, ae
		}
		ctx, cancel := withRequestDeadline(ctx, s.o.RequestTimeout)
		defer cancel()
		return f(ctx, req.Msg)
	}()
	if err != nil {
		ae := classify(err)
		if ae.status >= 500 {
			s.log.Warn("idservice: request failed", "route", route, "status", ae.status, "code", ae.code, "err", err)
		}
		s.m.observe(route, ae.status, time.Since(began))
		return nil, grpcError(ae)
	}
	s.m.observe(route, http.StatusOK, time.Since(began))
	return connect.NewResponse(res), nil
}

// count is a request's count: absent is 1; otherwise checkCount's.
func count(p *int32) (int, error) {
	if p == nil {
		return 1, nil
	}
	if err := checkCount(int64(*p)); err != nil {
		return 0, err
	}
	return int(*p), nil
}

// given is a proto3 scalar without presence as createRequest's optional
// field: 0, which cannot be told from absent, is absent (the default, as
// the .proto documents for step and chunk_size); any other value is given
// and checked.
func given(v int64) *int64 {
	if v == 0 {
		return nil
	}
	return &v
}

// CreateSequence is POST /v1/sequences. Its step and chunk_size of 0 are
// the defaults (given), unlike the HTTP body's explicit 0.
func (a grpcAPI) CreateSequence(ctx context.Context, req *connect.Request[v1.CreateSequenceRequest]) (*connect.Response[v1.CreateSequenceResponse], error) {
	return unary(ctx, a.s, grpcRouteCreate, ScopeAdmin, req, func(ctx context.Context, m *v1.CreateSequenceRequest) (*v1.CreateSequenceResponse, error) {
		c := createRequest{Name: m.GetName(), Type: m.GetType(), Start: m.Start, Step: given(m.GetStep()), ChunkSize: given(m.GetChunkSize()),
			Adaptive: m.GetAdaptive()}
		d, err := c.definition()
		if err != nil {
			return nil, err
		}
		created, err := a.s.Create(ctx, c.Name, d)
		if err != nil {
			return nil, err
		}
		return &v1.CreateSequenceResponse{Sequence: sequenceMessage(defView(c.Name, d.record())), Created: created}, nil
	})
}

// GetSequence is GET /v1/sequences/{name}.
func (a grpcAPI) GetSequence(ctx context.Context, req *connect.Request[v1.GetSequenceRequest]) (*connect.Response[v1.GetSequenceResponse], error) {
	return unary(ctx, a.s, grpcRouteGet, ScopeIssue, req, func(ctx context.Context, m *v1.GetSequenceRequest) (*v1.GetSequenceResponse, error) {
		v, err := a.s.sequenceState(ctx, m.GetName())
		if err != nil {
			return nil, err
		}
		return &v1.GetSequenceResponse{Sequence: sequenceMessage(v)}, nil
	})
}

// NextSequence is POST /v1/sequences/{name}/next.
func (a grpcAPI) NextSequence(ctx context.Context, req *connect.Request[v1.NextSequenceRequest]) (*connect.Response[v1.NextSequenceResponse], error) {
	return unary(ctx, a.s, grpcRouteNext, ScopeIssue, req, func(ctx context.Context, m *v1.NextSequenceRequest) (*v1.NextSequenceResponse, error) {
		if err := validateName(m.GetName()); err != nil {
			return nil, err
		}
		n, err := count(m.Count)
		if err != nil {
			return nil, err
		}
		ids, err := a.s.NextSequence(ctx, m.GetName(), n)
		if err != nil {
			return nil, err
		}
		return &v1.NextSequenceResponse{Ids: ids}, nil
	})
}

// NextTimeshard is POST /v1/timeshard/{layout}/next.
func (a grpcAPI) NextTimeshard(ctx context.Context, req *connect.Request[v1.NextTimeshardRequest]) (*connect.Response[v1.NextTimeshardResponse], error) {
	return unary(ctx, a.s, grpcRouteTimeshard, ScopeIssue, req, func(ctx context.Context, m *v1.NextTimeshardRequest) (*v1.NextTimeshardResponse, error) {
		name, _, err := a.s.layoutNamed(m.GetLayout())
		if err != nil {
			return nil, err
		}
		n, err := count(m.Count)
		if err != nil {
			return nil, err
		}
		ids, err := a.s.NextTimeshard(ctx, name, n)
		if err != nil {
			return nil, err
		}
		return &v1.NextTimeshardResponse{Ids: ids}, nil
	})
}

// DecomposeTimeshard is GET /v1/timeshard/{layout}/ids/{id}.
func (a grpcAPI) DecomposeTimeshard(ctx context.Context, req *connect.Request[v1.DecomposeTimeshardRequest]) (*connect.Response[v1.DecomposeTimeshardResponse], error) {
	return unary(ctx, a.s, grpcRouteDecompose, ScopeIssue, req, func(ctx context.Context, m *v1.DecomposeTimeshardRequest) (*v1.DecomposeTimeshardResponse, error) {
		name, l, err := a.s.layoutNamed(m.GetLayout())
		if err != nil {
			return nil, err
		}
		d, err := decompose(name, l, m.GetId())
		if err != nil {
			return nil, err
		}
		return &v1.DecomposeTimeshardResponse{Id: d.ID, Layout: d.Layout, Time: timestamppb.New(d.Time), MsSinceEpoch: d.Millis,
			Node: d.Node, Counter: d.Counter}, nil
	})
}

// ListLayouts is GET /v1/timeshard.
func (a grpcAPI) ListLayouts(ctx context.Context, req *connect.Request[v1.ListLayoutsRequest]) (*connect.Response[v1.ListLayoutsResponse], error) {
	return unary(ctx, a.s, grpcRouteLayouts, ScopeIssue, req, func(ctx context.Context, m *v1.ListLayoutsRequest) (*v1.ListLayoutsResponse, error) {
		views := a.s.layoutViews()
		out := &v1.ListLayoutsResponse{Layouts: make([]*v1.Layout, 0, len(views))}
		for _, v := range views {
			out.Layouts = append(out.Layouts, &v1.Layout{Name: v.Name, Bits: uint32(v.Bits), TimeBits: uint32(v.TimeBits),
				NodeBits: uint32(v.NodeBits), CounterBits: uint32(v.CounterBits), Epoch: timestamppb.New(v.Epoch),
				RunsOut: timestamppb.New(v.RunsOut), LifetimeYears: v.LifetimeYears, Nodes: v.Nodes,
				IdsPerMsPerNode: v.PerMillisecond, MaxId: v.MaxID, Node: v.Node})
		}
		return out, nil
	})
}

// NextUUIDs is POST /v1/uuids.
func (a grpcAPI) NextUUIDs(ctx context.Context, req *connect.Request[v1.NextUUIDsRequest]) (*connect.Response[v1.NextUUIDsResponse], error) {
	return unary(ctx, a.s, grpcRouteUUIDs, ScopeIssue, req, func(ctx context.Context, m *v1.NextUUIDsRequest) (*v1.NextUUIDsResponse, error) {
		n, err := count(m.Count)
		if err != nil {
			return nil, err
		}
		ids, err := a.s.NextUUIDs(n)
		if err != nil {
			return nil, err
		}
		return &v1.NextUUIDsResponse{Uuids: ids}, nil
	})
}

// sequenceMessage is v as the API's Sequence message.
func sequenceMessage(v sequenceView) *v1.Sequence {
	m := &v1.Sequence{Name: v.Name, Type: v.Type, Start: v.Start, Step: v.Step, ChunkSize: v.ChunkSize, MaxValue: v.MaxValue,
		Capacity: v.Capacity, Allocated: v.Allocated, Allocations: v.Allocations, NextChunkFirst: v.NextChunk, Exhausted: v.Exhausted,
		Adaptive: v.Adaptive, Retired: v.Retired}
	if v.LastAlloc != nil {
		m.LastAlloc = timestamppb.New(*v.LastAlloc)
	}
	if i := v.Instance; i != nil {
		m.Instance = &v1.InstanceStats{ChunkFetches: i.Fetches, Waits: i.Waits, Issued: i.Issued, Held: i.Held, ChunkSize: i.ChunkSize}
	}
	return m
}
