package idservice

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cqlseq/cqlseq/galloc"
	"github.com/cqlseq/cqlseq/timeshard"
)

// route is one route of the API.
type route struct {
	name    string // the metrics' route label
	method  string // "": any method
	pattern string
	scope   Scope
	// leaf marks Leaf's paths, answered as Leaf's Spring Boot 1.5 server
	// answers them (leaf.go): any method (method ""; OPTIONS answered as
	// Spring answers it, leafOptions), the path with a trailing slash too
	// (leafSlash), errors in Spring Boot 1.5's body (writeLeafError).
	leaf bool
	// leafPage marks Leaf's monitor pages (leafmonitor.go), whose errors
	// carry their own status and message rather than Leaf's Result.
	leafPage bool
	// open serves the route without a token whatever Options.Tokens: the
	// routes of LeafHandler.
	open bool
	h    func(ctx context.Context, w http.ResponseWriter, r *http.Request) error
}

// routes is the API: docs/service.md describes each.
func (s *Service) routes() []route {
	return []route{
		{name: "sequence_create", method: http.MethodPost, pattern: "/v1/sequences", scope: ScopeAdmin, h: s.handleCreate},
		{name: "sequence_list", method: http.MethodGet, pattern: "/v1/sequences", scope: ScopeIssue, h: s.handleList},
		{name: "sequence_get", method: http.MethodGet, pattern: "/v1/sequences/{name}", scope: ScopeIssue, h: s.handleSequence},
		{name: "sequence_alter", method: http.MethodPatch, pattern: "/v1/sequences/{name}", scope: ScopeAdmin, h: s.handleAlter},
		{name: "sequence_retire", method: http.MethodDelete, pattern: "/v1/sequences/{name}", scope: ScopeAdmin, h: s.handleRetire},
		{name: "sequence_next", method: http.MethodPost, pattern: "/v1/sequences/{name}/next", scope: ScopeIssue, h: s.handleSequenceNext},
		{name: "layouts", method: http.MethodGet, pattern: "/v1/timeshard", scope: ScopeIssue, h: s.handleLayouts},
		{name: "timeshard_next", method: http.MethodPost, pattern: "/v1/timeshard/{layout}/next", scope: ScopeIssue, h: s.handleTimeshardNext},
		{name: "timeshard_decompose", method: http.MethodGet, pattern: "/v1/timeshard/{layout}/ids/{id}", scope: ScopeIssue, h: s.handleDecompose},
		{name: "uuid_next", method: http.MethodPost, pattern: "/v1/uuids", scope: ScopeIssue, h: s.handleUUIDs},
		{name: "leaf_segment", pattern: "/api/segment/get/{key}", scope: ScopeIssue, leaf: true, h: s.handleLeafSegment},
		{name: "leaf_snowflake", pattern: "/api/snowflake/get/{key}", scope: ScopeIssue, leaf: true, h: s.handleLeafSnowflake},
		{name: "leaf_cache", pattern: "/cache", scope: ScopeIssue, leaf: true, leafPage: true, h: s.handleLeafCache},
		{name: "leaf_db", pattern: "/db", scope: ScopeIssue, leaf: true, leafPage: true, h: s.handleLeafDB},
		{name: "leaf_decode", pattern: "/decodeSnowflakeId", scope: ScopeIssue, leaf: true, leafPage: true, h: s.handleLeafDecode},
		{name: "healthz", method: http.MethodGet, pattern: "/healthz", h: s.handleHealthz},
		{name: "readyz", method: http.MethodGet, pattern: "/readyz", h: s.handleReadyz},
	}
}

// Handler returns the HTTP handler of the API, /healthz, /readyz,
// /metrics and the gRPC API (grpc.go; gRPC needs HTTP/2: Serve offers it).
func (s *Service) Handler() http.Handler {
	mux := http.NewServeMux()
	for _, rts := range byPattern(s.routes()) {
		h := s.wrapMethods(rts)
		mux.Handle(rts[0].pattern, h)
		if rts[0].leaf {
			mux.Handle(leafSlash(rts[0].pattern), h)
		}
	}
	mux.Handle(s.grpcHandler())
	metrics := promhttp.HandlerFor(s.o.Registry, promhttp.HandlerOpts{})
	mux.Handle("/metrics", s.wrap(route{name: "metrics", method: http.MethodGet, h: func(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
		metrics.ServeHTTP(w, r)
		return nil
	}}))
	mux.Handle("/", s.wrap(route{name: "not_found", h: func(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
		return newError(http.StatusNotFound, CodeNotFound, "no route %s %s", r.Method, r.URL.Path)
	}}))
	return mux
}

// LeafHandler returns the HTTP handler of Leaf's paths (/api/segment/get/,
// /api/snowflake/get/) and monitor pages (/cache, /db,
// /decodeSnowflakeId), /healthz and /readyz, and nothing else (any other
// path is 404 not_found), all served without a token whatever
// Options.Tokens: for Leaf's clients, which send none, on a listener of
// their own (ServeLeaf; `cqlseq serve --leaf-listen`). Nothing on it can
// create a sequence or change a definition: a Leaf path takes IDs of
// existing sequences and of the snowflake layout, and the monitor pages
// read (/db lists every sequence's name and state). The requests are
// counted under the same route labels as on Handler.
func (s *Service) LeafHandler() http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		if !rt.leaf && rt.name != "healthz" && rt.name != "readyz" {
			continue
		}
		rt.open = true
		h := s.wrap(rt)
		mux.Handle(rt.pattern, h)
		if rt.leaf {
			mux.Handle(leafSlash(rt.pattern), h)
		}
	}
	mux.Handle("/", s.wrap(route{name: "not_found", open: true, h: func(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
		return newError(http.StatusNotFound, CodeNotFound, "no route %s %s on the Leaf listener (Leaf's paths and monitor pages only)", r.Method, r.URL.Path)
	}}))
	return mux
}

// statusWriter records the status code written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// wrap checks the method, the token and the body's size before rt's
// handler runs, answers its error, and records the request's metrics. A
// Leaf path answers OPTIONS itself, once the token is checked.
func (s *Service) wrap(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		err := s.serve(sw, r, rt)
		if err != nil {
			ae := classify(err)
			if ae.status >= 500 {
				s.log.Warn("idservice: request failed", "route", rt.name, "status", ae.status, "code", ae.code, "err", err)
			}
			if rt.leaf {
				writeLeafError(sw, r, ae, rt.leafPage)
			} else {
				writeError(sw, ae)
			}
		}
		s.m.observe(rt.name, sw.status, time.Since(began))
	})
}

func (s *Service) serve(w http.ResponseWriter, r *http.Request, rt route) error {
	if rt.method != "" && r.Method != rt.method && !(rt.method == http.MethodGet && r.Method == http.MethodHead) {
		w.Header().Set("Allow", rt.method)
		return newError(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s %s: use %s", r.Method, r.URL.Path, rt.method)
	}
	tokens := s.o.Tokens
	if rt.open {
		tokens = nil
	}
	if ae := tokens.authorize(r, rt.scope); ae != nil {
		if ae.status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="cqlseq"`)
		}
		return ae
	}
	if rt.leaf && r.Method == http.MethodOptions {
		leafOptions(w)
		return nil
	}
	if r.ContentLength > s.o.MaxBodyBytes {
		return bodyTooLarge(s.o.MaxBodyBytes)
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.o.MaxBodyBytes)
	ctx, cancel := withRequestDeadline(r.Context(), s.o.RequestTimeout)
	defer cancel()
	return rt.h(ctx, w, r)
}

func bodyTooLarge(limit int64) *apiError {
	return newError(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "the request body is larger than %d bytes", limit)
}

// errorBody is the JSON body of every error of the API's own routes.
type errorBody struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, ae *apiError) {
	if ae.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, ae.status, errorBody{Code: ae.code, Message: ae.message})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"code":"internal","message":"encoding the response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeIDs answers 200 with idsBody{ids} as writeJSON does, byte for
// byte, without encoding/json's reflection: a next route's answer of up
// to MaxCount numbers is the service's hottest output (make bench-service).
// A nil ids is answered [] (encoding/json would write null); the next
// routes never answer nil.
func writeIDs(w http.ResponseWriter, ids []int64) {
	bp := idsBufs.Get().(*[]byte)
	b := (*bp)[:0]
	b = append(b, `{"ids":[`...)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, id, 10)
	}
	b = append(b, "]}\n"...)
	setBodyHeaders(w, "application/json", len(b))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b) // a ResponseWriter does not keep b
	if cap(b) <= maxPooledIDsBuf {
		*bp = b
		idsBufs.Put(bp)
	}
}

// setBodyHeaders sets an answer's Content-Type and Content-Length by
// their canonical keys: Header.Set would canonicalise them on every
// request. A one-element literal has no room to append to.
func setBodyHeaders(w http.ResponseWriter, contentType string, n int) {
	h := w.Header()
	h["Content-Type"] = []string{contentType}
	h["Content-Length"] = []string{strconv.Itoa(n)}
}

// maxPooledIDsBuf bounds the answers writeIDs keeps a buffer of: a full
// batch of MaxCount 19-digit IDs is about 20 bytes an ID.
const maxPooledIDsBuf = 20*MaxCount + 64

// idsBufs holds writeIDs' answer buffers, so that a batch's 20 KB is not
// allocated anew for each request.
var idsBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// countBody is the optional JSON body of the routes that take a count
// (the next routes and /v1/uuids): {"count": N}. Count is kept raw so
// that a count that is not a whole number is invalid_count, as in the
// query, rather than a decoding error.
type countBody struct {
	Count json.RawMessage `json:"count"`
}

// parseCount reads the count of a request to a route that takes one, from
// the count query parameter and from an optional JSON body {"count": N}
// (an empty or blank body is no body; a null count is no count). Absent
// from both is 1. Each given is checked as queryCount and bodyCount check
// it; given in both, they must be equal, else the request is bad_request.
// A body that is not one JSON object, or has a field other than count, is
// bad_request (decodeBody). Nothing is taken before the count is known, so
// a refused request costs nothing.
func (s *Service) parseCount(r *http.Request) (int, error) {
	qn, inQuery, err := queryCount(r)
	if err != nil {
		return 0, err
	}
	var raw json.RawMessage
	if r.ContentLength != 0 { // 0: no body (the hot path: nothing decoded or allocated); -1: unknown
		var b countBody
		if err := s.decodeBody(r, &b, true); err != nil {
			return 0, err
		}
		raw = b.Count
	}
	bn, inBody, err := bodyCount(raw)
	switch {
	case err != nil:
		return 0, err
	case inQuery && inBody && qn != bn:
		return 0, newError(http.StatusBadRequest, CodeBadRequest,
			"count %d in the query and count %d in the body disagree: give it in one place (or the same in both)", qn, bn)
	case inBody:
		return bn, nil
	case inQuery:
		return qn, nil
	}
	return 1, nil
}

// queryCount reads the count query parameter: given reports whether it
// is there; if so, it must be given once, as decimal digits only,
// 1..MaxCount.
func queryCount(r *http.Request) (n int, given bool, err error) {
	if r.URL.RawQuery == "" {
		return 0, false, nil // the hot path: no query parsed
	}
	vs, ok := r.URL.Query()["count"]
	if !ok {
		return 0, false, nil
	}
	if len(vs) != 1 || !digits(vs[0]) || len(vs[0]) > 6 {
		return 0, true, badCount(vs[0])
	}
	n, err = strconv.Atoi(vs[0])
	if err != nil || checkCount(int64(n)) != nil {
		return 0, true, badCount(vs[0])
	}
	return n, true, nil
}

// bodyCount reads a body's raw count: given reports whether it is there
// (absent or null is not); if so, it must be a JSON number written as
// decimal digits only (no sign, fraction or exponent; not a string),
// 1..MaxCount.
func bodyCount(raw json.RawMessage) (n int, given bool, err error) {
	v := string(bytes.TrimSpace(raw))
	if v == "" || v == "null" {
		return 0, false, nil
	}
	if !digits(v) || len(v) > 6 {
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		return 0, true, badCount(v)
	}
	n, err = strconv.Atoi(v)
	if err != nil || checkCount(int64(n)) != nil {
		return 0, true, badCount(v)
	}
	return n, true, nil
}

// checkCount checks a number of IDs asked for: 1..MaxCount.
func checkCount(n int64) error {
	if n < 1 || n > MaxCount {
		return badCount(strconv.FormatInt(n, 10))
	}
	return nil
}

// badCount is the invalid_count error of a count given as shown.
func badCount(shown string) *apiError {
	return newError(http.StatusBadRequest, CodeInvalidCount, "count %q: want a whole number from 1 to %d", shown, MaxCount)
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// validateName checks a sequence name or Leaf segment key: 1..MaxNameLen bytes of
// [A-Za-z0-9._-].
func validateName(name string) error {
	ok := name != "" && len(name) <= MaxNameLen
	for i := 0; ok && i < len(name); i++ {
		c := name[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
	}
	if !ok {
		shown := name
		if len(shown) > 40 {
			shown = shown[:40] + "..."
		}
		return newError(http.StatusBadRequest, CodeInvalidName, "name %q: want 1 to %d characters of A-Z a-z 0-9 . _ -", shown, MaxNameLen)
	}
	return nil
}

// validateNewName checks the name of a sequence to create, beyond
// validateName: a name of dots only is invalid_name. "." and ".." are dot
// segments, which URL normalisers (RFC 3986 section 5.2.4, browsers,
// proxies, Go's ServeMux) remove from a path, so such a sequence could not
// be reached on /api/segment/get/{key} nor /v1/sequences/{name}; longer
// runs of dots are refused too, as some normalisers trim them. Only
// creation is refused: a sequence of such a name created before stays
// reachable where its name is not in a path (gRPC).
func validateNewName(name string) error {
	if strings.Trim(name, ".") != "" {
		return nil
	}
	shown := name
	if len(shown) > 40 {
		shown = shown[:40] + "..."
	}
	return newError(http.StatusBadRequest, CodeInvalidName,
		"name %q: a name of dots only cannot be reached on a URL path (normalisers remove . and .. segments); use a name with another character", shown)
}

// createRequest is the body of POST /v1/sequences. Start, Step and
// ChunkSize are nil when omitted (or null): the default; a value given,
// 0 included, is checked.
type createRequest struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	Start     *int64 `json:"start"`
	Step      *int64 `json:"step"`
	ChunkSize *int64 `json:"chunk_size"`
	Adaptive  bool   `json:"adaptive"`
}

var typeNames = map[string]galloc.Type{"smallint": galloc.SmallInt, "integer": galloc.Integer, "bigint": galloc.BigInt}

// definition validates the request and returns its definition with
// galloc's defaults filled in. The name must pass validateName and
// validateNewName; a step or chunk size given must be at least 1 (galloc
// reads 0 as "the default", so an explicit 0 is refused here rather than
// silently taken as omitted).
func (c createRequest) definition() (Definition, error) {
	if err := validateName(c.Name); err != nil {
		return Definition{}, err
	}
	if err := validateNewName(c.Name); err != nil {
		return Definition{}, err
	}
	var o galloc.Options
	if c.Type != "" {
		t, ok := typeNames[c.Type]
		if !ok {
			return Definition{}, newError(http.StatusBadRequest, CodeInvalidDefinition, "type %q: want smallint, integer or bigint", c.Type)
		}
		o.Type = t
	}
	if c.Start != nil {
		o.Start, o.StartZero = *c.Start, *c.Start == 0
	}
	var bad []string
	for _, f := range []struct {
		name string
		v    *int64
		to   *int64
	}{{"step", c.Step, &o.Step}, {"chunk_size", c.ChunkSize, &o.ChunkSize}} {
		switch {
		case f.v == nil:
		case *f.v < 1:
			bad = append(bad, fmt.Sprintf("%s %d", f.name, *f.v))
		default:
			*f.to = *f.v
		}
	}
	if len(bad) > 0 {
		return Definition{}, newError(http.StatusBadRequest, CodeInvalidDefinition,
			"%s: want a whole number of at least 1 (or omit the field for the default)", strings.Join(bad, ", "))
	}
	o.EnsureDefaults()
	if err := o.Validate(); err != nil {
		return Definition{}, newError(http.StatusBadRequest, CodeInvalidDefinition, "%s", oneLine(err))
	}
	return Definition{Type: o.Type, Start: o.Start, Step: o.Step, ChunkSize: o.ChunkSize, Adaptive: c.Adaptive}, nil
}

func oneLine(err error) string {
	return string(bytes.ReplaceAll([]byte(err.Error()), []byte("\n"), []byte("; ")))
}

// decodeBody decodes r's JSON body into v: unknown fields, trailing data
// and a body above the limit are errors. An empty (or blank) body is an
// error unless optional, when it leaves v as it is.
func (s *Service) decodeBody(r *http.Request, v any, optional bool) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if optional && errors.Is(err, io.EOF) {
		return nil
	}
	if err == nil && dec.More() {
		err = errors.New("data after the JSON object")
	}
	if err == nil {
		if _, e := io.Copy(io.Discard, r.Body); e != nil {
			err = e
		}
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return bodyTooLarge(s.o.MaxBodyBytes)
	case err != nil:
		return newError(http.StatusBadRequest, CodeBadRequest, "the body is not a valid JSON request: %v", err)
	}
	return nil
}

// sequenceView is a sequence's definition and state.
type sequenceView struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	Start     int64  `json:"start"`
	Step      int64  `json:"step"`
	ChunkSize int64  `json:"chunk_size"`
	MaxValue  int64  `json:"max_value"`
	Capacity  uint64 `json:"capacity"`
	// Adaptive: chunks follow Leaf's dynamic step from chunk_size up to
	// galloc.MaxAdaptiveChunkSize. Retired: no more values (410).
	Adaptive bool `json:"adaptive"`
	Retired  bool `json:"retired"`

	// State, from the stored record (GET only).
	Allocated   *uint64    `json:"allocated,omitempty"`
	Allocations *uint64    `json:"allocations,omitempty"`
	NextChunk   *int64     `json:"next_chunk_first,omitempty"`
	Exhausted   *bool      `json:"exhausted,omitempty"`
	LastAlloc   *time.Time `json:"last_alloc,omitempty"`
	Instance    *instView  `json:"instance,omitempty"`
}

// instView is this instance's share of a sequence.
type instView struct {
	Fetches uint64 `json:"chunk_fetches"`
	Waits   uint64 `json:"waits"`
	Issued  uint64 `json:"issued"`
	Held    uint64 `json:"held"`
	// ChunkSize is the size of the last chunk this instance allocated: an
	// adaptive sequence's current step.
	ChunkSize int64 `json:"chunk_size"`
}

func defView(name string, r galloc.Record) sequenceView {
	return sequenceView{Name: name, Type: r.Type.String(), Start: r.Start, Step: r.Step, ChunkSize: r.ChunkSize,
		MaxValue: r.Type.Max(), Capacity: r.Capacity(), Adaptive: r.Adaptive, Retired: r.Retired}
}

func (s *Service) handleCreate(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	var req createRequest
	if err := s.decodeBody(r, &req, false); err != nil {
		return err
	}
	d, err := req.definition()
	if err != nil {
		return err
	}
	created, err := s.Create(ctx, req.Name, d)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, defView(req.Name, d.record()))
	return nil
}

func (s *Service) handleSequence(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	v, err := s.sequenceState(ctx, r.PathValue("name"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// sequenceState validates name and returns the sequence's definition and
// state: the stored record's, and this instance's share when it has the
// sequence open.
func (s *Service) sequenceState(ctx context.Context, name string) (sequenceView, error) {
	if err := validateName(name); err != nil {
		return sequenceView{}, err
	}
	rec, found, err := galloc.ReadRecord(ctx, s.st, name)
	switch {
	case err != nil:
		return sequenceView{}, fmt.Errorf("idservice: reading sequence %q: %w", name, err)
	case !found:
		return sequenceView{}, fmt.Errorf("%w: %q", ErrUnknownSequence, name)
	}
	return s.stateView(name, rec), nil
}

// stateView is rec's definition and state, with this instance's share
// when it has the sequence open.
func (s *Service) stateView(name string, rec galloc.Record) sequenceView {
	v := defView(name, rec)
	exh := rec.Exhausted()
	v.Allocated, v.Allocations, v.Exhausted = &rec.Allocated, &rec.Allocations, &exh
	if next, ok := rec.AllocatedUpTo(); ok {
		v.NextChunk = &next
	}
	if !rec.LastAlloc.IsZero() {
		t := rec.LastAlloc.UTC()
		v.LastAlloc = &t
	}
	if q, ok := s.openSeq(name); ok {
		st := q.Stats()
		v.Instance = &instView{Fetches: st.Fetches, Waits: st.Waits, Issued: st.Issued, Held: st.Held, ChunkSize: st.ChunkSize}
	}
	return v
}

// idsBody is the answer of the next routes.
type idsBody struct {
	IDs []int64 `json:"ids"`
}

func (s *Service) handleSequenceNext(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := validateName(name); err != nil {
		return err
	}
	n, err := s.parseCount(r)
	if err != nil {
		return err
	}
	ids, err := s.NextSequence(ctx, name, n)
	if err != nil {
		return err
	}
	writeIDs(w, ids)
	return nil
}

// layoutView describes a timeshard layout.
type layoutView struct {
	Name           string    `json:"name"`
	Bits           uint      `json:"bits"`
	TimeBits       uint      `json:"time_bits"`
	NodeBits       uint      `json:"node_bits"`
	CounterBits    uint      `json:"counter_bits"`
	Epoch          time.Time `json:"epoch"`
	RunsOut        time.Time `json:"runs_out"`
	LifetimeYears  float64   `json:"lifetime_years"`
	Nodes          uint32    `json:"nodes"`
	PerMillisecond uint64    `json:"ids_per_ms_per_node"`
	MaxID          int64     `json:"max_id"`
	Node           *uint32   `json:"node,omitempty"` // this instance's node ID
}

func (s *Service) handleLayouts(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, struct {
		Layouts []layoutView `json:"layouts"`
	}{s.layoutViews()})
	return nil
}

// layoutViews describes the layouts, in layoutNames' order.
func (s *Service) layoutViews() []layoutView {
	out := make([]layoutView, 0, len(layoutNames))
	for _, name := range layoutNames {
		l := s.layouts[name].layout
		v := layoutView{Name: name, Bits: l.IDBits(), TimeBits: l.TimeBits, NodeBits: l.NodeBits, CounterBits: l.CounterBits,
			Epoch: l.Epoch.UTC(), RunsOut: l.RunsOut(), Nodes: l.Nodes(), PerMillisecond: l.PerMillisecond(), MaxID: l.MaxID(),
			LifetimeYears: math.Round(l.RunsOut().Sub(l.Epoch).Hours()/24/365.25*10) / 10}
		if node, ok := s.Node(name); ok {
			v.Node = &node
		}
		out = append(out, v)
	}
	return out
}

// layoutOf returns the layout the path names.
func (s *Service) layoutOf(r *http.Request) (string, timeshard.Layout, error) {
	return s.layoutNamed(r.PathValue("layout"))
}

// layoutNamed returns layout name; one the service does not offer is
// unknown_layout.
func (s *Service) layoutNamed(name string) (string, timeshard.Layout, error) {
	slot, ok := s.layouts[name]
	if !ok {
		if len(name) > 40 {
			name = name[:40] + "..."
		}
		return "", timeshard.Layout{}, newError(http.StatusNotFound, CodeUnknownLayout, "layout %q: want 63 or 53", name)
	}
	return name, slot.layout, nil
}

func (s *Service) handleTimeshardNext(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	name, _, err := s.layoutOf(r)
	if err != nil {
		return err
	}
	n, err := s.parseCount(r)
	if err != nil {
		return err
	}
	ids, err := s.NextTimeshard(ctx, name, n)
	if err != nil {
		return err
	}
	writeIDs(w, ids)
	return nil
}

// decomposed is an ID's fields.
type decomposed struct {
	ID      int64     `json:"id"`
	Layout  string    `json:"layout"`
	Time    time.Time `json:"time"`
	Millis  int64     `json:"ms_since_epoch"`
	Node    uint32    `json:"node"`
	Counter uint64    `json:"counter"`
}

func (s *Service) handleDecompose(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	name, l, err := s.layoutOf(r)
	if err != nil {
		return err
	}
	raw := r.PathValue("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if !digits(raw) || err != nil {
		return badID(name, l, raw)
	}
	d, err := decompose(name, l, id)
	if err != nil {
		return badID(name, l, raw)
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// decompose splits id of layout name (l) into its fields; an ID outside 0
// to l.MaxID() is invalid_id.
func decompose(name string, l timeshard.Layout, id int64) (decomposed, error) {
	if id < 0 || id > l.MaxID() {
		return decomposed{}, badID(name, l, strconv.FormatInt(id, 10))
	}
	return decomposed{ID: id, Layout: name, Time: l.Time(id), Millis: l.Millis(id), Node: l.Node(id), Counter: l.Counter(id)}, nil
}

// badID is the invalid_id error of an ID given as shown.
func badID(name string, l timeshard.Layout, shown string) *apiError {
	if len(shown) > 40 {
		shown = shown[:40] + "..."
	}
	return newError(http.StatusBadRequest, CodeInvalidID, "id %q: want a whole number from 0 to %d (layout %s)", shown, l.MaxID(), name)
}

func (s *Service) handleUUIDs(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	n, err := s.parseCount(r)
	if err != nil {
		return err
	}
	ids, err := s.NextUUIDs(n)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		UUIDs []string `json:"uuids"`
	}{ids})
	return nil
}

func (s *Service) handleHealthz(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, struct {
		Status string `json:"status"`
	}{"ok"})
	return nil
}

// readyBody is /readyz's body: status "ready", "degraded" (200: the
// layouts of Waiting are answered 503 until a node ID is leased) or "not
// ready" (503).
type readyBody struct {
	Status  string   `json:"status"`
	Reason  string   `json:"reason,omitempty"`
	Waiting []string `json:"waiting_layouts,omitempty"`
}

func (s *Service) handleReadyz(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	waiting := s.Waiting()
	if why := s.readiness(); why != "" {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, readyBody{Status: "not ready", Reason: why, Waiting: waiting})
		return nil
	}
	if len(waiting) > 0 {
		writeJSON(w, http.StatusOK, readyBody{Status: "degraded", Waiting: waiting,
			Reason: "no node lease of layout " + strings.Join(waiting, ", ") + " (waiting for a free node ID; its IDs are answered 503)"})
		return nil
	}
	writeJSON(w, http.StatusOK, readyBody{Status: "ready"})
	return nil
}
