package idservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/cqlseq/cqlseq/galloc"
)

// Listing, altering and retiring sequences (docs/service.md, "Sequences:
// list, alter, retire"). What makes them safe is galloc's: the values a
// sequence hands out are decided by its record's allocated count alone,
// which every allocation advances with a compare-and-swap; Alter and
// Retire replace the same record with a compare-and-swap and change only
// the chunk size, the adaptive flag and the retired flag. An allocation
// that raced an alter loses its swap and reads the record again, so no
// value is allocated twice, and the count never goes back.

// byPattern groups routes by pattern, in the order of their first route:
// the routes of one pattern differ by method.
func byPattern(rts []route) [][]route {
	var out [][]route
	at := map[string]int{}
	for _, rt := range rts {
		i, ok := at[rt.pattern]
		if !ok {
			i = len(out)
			at[rt.pattern] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], rt)
	}
	return out
}

// wrapMethods is wrap of the route of the request's method among rts (one
// pattern); another method is 405 method_not_allowed with an Allow header
// of all of theirs, counted under the first route's label.
func (s *Service) wrapMethods(rts []route) http.Handler {
	if len(rts) == 1 {
		return s.wrap(rts[0])
	}
	hs := map[string]http.Handler{}
	var allow []string
	for _, rt := range rts {
		hs[rt.method] = s.wrap(rt)
		allow = append(allow, rt.method)
	}
	if h, ok := hs[http.MethodGet]; ok {
		if _, ok := hs[http.MethodHead]; !ok {
			hs[http.MethodHead] = h
		}
	}
	allowed := strings.Join(allow, ", ")
	refuse := s.wrap(route{name: rts[0].name, pattern: rts[0].pattern, h: func(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Allow", allowed)
		return newError(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "%s %s: use %s", r.Method, r.URL.Path, allowed)
	}})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := hs[r.Method]; ok {
			h.ServeHTTP(w, r)
			return
		}
		refuse.ServeHTTP(w, r)
	})
}

// openSeq returns sequence name if this instance has it open.
func (s *Service) openSeq(name string) (*galloc.Sequence, bool) {
	q, ok := s.seqs.Load(name)
	if !ok {
		return nil, false
	}
	return q.(*galloc.Sequence), true
}

// checkCreate decides a create of sequence name with definition d when r
// is stored: a retired sequence is galloc.ErrRetired (its name is never
// created again: the values it handed out would start over); another
// definition (chunk size and adaptive flag included, as Alter left them)
// is galloc.ErrDefinitionMismatch.
func checkCreate(name string, r galloc.Record, d Definition) error {
	if r.Retired {
		return fmt.Errorf("%w: sequence %q: a retired name cannot be created again (its values up to %d were allocated); choose another name",
			galloc.ErrRetired, name, r.Value(r.Allocated))
	}
	if r.Type != d.Type || r.Start != d.Start || r.Step != d.Step || r.ChunkSize != d.ChunkSize || r.Adaptive != d.Adaptive {
		return fmt.Errorf("%w: sequence %q is stored as %v start %d step %d chunk %d adaptive %v",
			galloc.ErrDefinitionMismatch, name, r.Type, r.Start, r.Step, r.ChunkSize, r.Adaptive)
	}
	return nil
}

// DefaultListLimit is the page size of a list without a limit; at most
// galloc.MaxListLimit.
const DefaultListLimit = galloc.MaxListLimit

// List returns the sequences of the store after name after ("": from the
// first), up to limit (1..galloc.MaxListLimit), in byte order of their
// names, retired ones included; next is the after of the next page, ""
// at the end. Sequences created before the catalog existed are listed once
// an instance of this release opens them.
func (s *Service) List(ctx context.Context, after string, limit int) (views []sequenceView, next string, err error) {
	if s.closed.Load() {
		return nil, "", ErrClosed
	}
	page, next, err := galloc.List(ctx, s.st, after, limit)
	if err != nil {
		return nil, "", fmt.Errorf("idservice: listing sequences: %w", err)
	}
	views = make([]sequenceView, 0, len(page))
	for _, l := range page {
		views = append(views, s.stateView(l.Name, l.Record))
	}
	return views, next, nil
}

// Change is what Alter changes: nil fields stay.
type Change struct {
	// ChunkSize applies to the chunks allocated from now on, by every
	// instance; chunks allocated before keep their size.
	ChunkSize *int64
	// Adaptive turns Leaf's dynamic step on or off (galloc.AdaptiveChunkSize).
	Adaptive *bool
}

// Alter changes sequence name's chunk size or adaptive flag and returns its
// state. A missing sequence is ErrUnknownSequence, a retired one
// galloc.ErrRetired.
func (s *Service) Alter(ctx context.Context, name string, c Change) (sequenceView, error) {
	if s.closed.Load() {
		return sequenceView{}, ErrClosed
	}
	gc := galloc.Change{Adaptive: c.Adaptive}
	if c.ChunkSize != nil {
		gc.ChunkSize = *c.ChunkSize
	}
	rec, found, err := galloc.Alter(ctx, s.st, name, gc)
	switch {
	case errors.Is(err, galloc.ErrInvalidOptions):
		return sequenceView{}, newError(http.StatusBadRequest, CodeInvalidDefinition, "%s", oneLine(err))
	case err != nil:
		return sequenceView{}, err
	case !found:
		return sequenceView{}, fmt.Errorf("%w: %q", ErrUnknownSequence, name)
	}
	s.log.Info("idservice: sequence altered", "sequence", name, "chunk", rec.ChunkSize, "adaptive", rec.Adaptive)
	return s.stateView(name, rec), nil
}

// Retire retires sequence name and returns its state: no instance
// allocates a chunk of it again, this instance hands out no more of its
// values at once, and every other within Options.ProbeInterval (or at its
// next allocation, if sooner); each value is handed out at most once all
// the same. Retiring a retired sequence is not an error. A missing
// sequence is ErrUnknownSequence.
func (s *Service) Retire(ctx context.Context, name string) (sequenceView, error) {
	if s.closed.Load() {
		return sequenceView{}, ErrClosed
	}
	rec, found, err := galloc.Alter(ctx, s.st, name, galloc.Change{Retire: true})
	switch {
	case err != nil:
		return sequenceView{}, err
	case !found:
		return sequenceView{}, fmt.Errorf("%w: %q", ErrUnknownSequence, name)
	}
	if q, ok := s.openSeq(name); ok {
		q.MarkRetired()
	}
	s.log.Info("idservice: sequence retired", "sequence", name, "allocated", rec.Allocated)
	return s.stateView(name, rec), nil
}

// refreshRetired reads the records of the open sequences not yet seen
// retired (galloc.MaxListLimit a request) and stops those retired by
// another instance. keep runs it every ProbeInterval.
func (s *Service) refreshRetired(ctx context.Context) {
	var live []*galloc.Sequence
	for _, q := range s.sequences() {
		if !q.Stats().Retired {
			live = append(live, q)
		}
	}
	for len(live) > 0 && ctx.Err() == nil {
		n := min(len(live), galloc.MaxListLimit)
		keys := make([][]byte, n)
		byName := make(map[string]*galloc.Sequence, n)
		for i, q := range live[:n] {
			keys[i] = galloc.PKey(q.Name())
			byName[q.Name()] = q
		}
		live = live[n:]
		state := galloc.StateCCols()
		err := s.st.ReadPartitions(ctx, keys, state, append(state, 0), func(pKey, _, value []byte) error {
			var r galloc.Record
			if r.UnmarshalBinary(value) == nil && r.Retired {
				if q := byName[string(pKey[4:])]; q != nil {
					q.MarkRetired()
					s.log.Info("idservice: sequence seen retired", "sequence", q.Name())
				}
			}
			return nil
		})
		if err != nil {
			return // the store probe reports an unreachable store
		}
	}
}

// alterRequest is the body of PATCH /v1/sequences/{name}: the fields that
// can change. The others of a sequence are refused by name (they decide
// which values were handed out); any field not of a sequence is
// bad_request.
type alterRequest struct {
	ChunkSize *int64 `json:"chunk_size"`
	Adaptive  *bool  `json:"adaptive"`

	Name  json.RawMessage `json:"name"`
	Type  json.RawMessage `json:"type"`
	Start json.RawMessage `json:"start"`
	Step  json.RawMessage `json:"step"`
}

// change validates the request.
func (a alterRequest) change() (Change, error) {
	var fixed []string
	for _, f := range []struct {
		name string
		v    json.RawMessage
	}{{"name", a.Name}, {"type", a.Type}, {"start", a.Start}, {"step", a.Step}} {
		if f.v != nil {
			fixed = append(fixed, f.name)
		}
	}
	switch {
	case len(fixed) > 0:
		return Change{}, newError(http.StatusBadRequest, CodeInvalidDefinition,
			"%s cannot change (they decide which values were handed out): only chunk_size and adaptive can; create a new sequence for another", strings.Join(fixed, ", "))
	case a.ChunkSize == nil && a.Adaptive == nil:
		return Change{}, newError(http.StatusBadRequest, CodeInvalidDefinition, "nothing to change: give chunk_size, adaptive or both")
	case a.ChunkSize != nil && *a.ChunkSize < 1:
		return Change{}, newError(http.StatusBadRequest, CodeInvalidDefinition, "chunk_size %d: want a whole number of at least 1", *a.ChunkSize)
	}
	return Change{ChunkSize: a.ChunkSize, Adaptive: a.Adaptive}, nil
}

// sequencesPage is the answer of GET /v1/sequences.
type sequencesPage struct {
	Sequences []sequenceView `json:"sequences"`
	// NextAfter is the after of the next page; absent on the last.
	NextAfter string `json:"next_after,omitempty"`
}

// listParams reads GET /v1/sequences' query: limit (1..galloc.MaxListLimit,
// default DefaultListLimit) and after (a name; "" or absent: from the
// first). Each may be given once.
func listParams(r *http.Request) (after string, limit int, err error) {
	q := r.URL.Query()
	for k, vs := range q {
		switch {
		case k != "limit" && k != "after":
			return "", 0, newError(http.StatusBadRequest, CodeBadRequest, "query parameter %q: want limit or after", k)
		case len(vs) != 1:
			return "", 0, newError(http.StatusBadRequest, CodeBadRequest, "query parameter %q given %d times: give it once", k, len(vs))
		}
	}
	limit = DefaultListLimit
	if vs, ok := q["limit"]; ok {
		n, err := strconv.Atoi(vs[0])
		if !digits(vs[0]) || err != nil || n < 1 || n > galloc.MaxListLimit {
			return "", 0, newError(http.StatusBadRequest, CodeBadRequest, "limit %q: want a whole number from 1 to %d", vs[0], galloc.MaxListLimit)
		}
		limit = n
	}
	after = q.Get("after")
	if after != "" {
		if err := validateName(after); err != nil {
			return "", 0, err
		}
	}
	return after, limit, nil
}

func (s *Service) handleList(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	after, limit, err := listParams(r)
	if err != nil {
		return err
	}
	views, next, err := s.List(ctx, after, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, sequencesPage{Sequences: views, NextAfter: next})
	return nil
}

func (s *Service) handleAlter(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := validateName(name); err != nil {
		return err
	}
	var req alterRequest
	if err := s.decodeBody(r, &req, false); err != nil {
		return err
	}
	c, err := req.change()
	if err != nil {
		return err
	}
	v, err := s.Alter(ctx, name, c)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

func (s *Service) handleRetire(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	if err := validateName(name); err != nil {
		return err
	}
	if r.ContentLength > 0 {
		return newError(http.StatusBadRequest, CodeBadRequest, "DELETE takes no body")
	}
	v, err := s.Retire(ctx, name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
