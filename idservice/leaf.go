package idservice

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Meituan Leaf's two paths answer as Leaf's LeafController does, whose
// @RequestMapping names no method: any method is answered as GET (OPTIONS
// as Spring answers it: leafOptions), and the path with a trailing slash
// as the path (Spring Boot 1.5 matches it). They answer the ID
// as a plain-text body (Spring's String answer, text/plain), and an error
// as HTTP 500 with Spring Boot's error body, whose message is Leaf's
// Result.toString with Leaf's exception ID:
//
//	{"timestamp":"...","status":500,"error":"Internal Server Error",
//	 "message":"Result{id=-2, status=EXCEPTION}","path":"/api/segment/get/k"}
//
// Leaf's exception IDs: -2 the key does not exist (here also: a key that
// is not a valid name), -3 no segment could be loaded (here: the store is
// unavailable or the sequence is exhausted), -1 any other failure. The
// body also carries this API's "code". Auth errors (401, 403) answer as
// every route does: Leaf has no authentication.
const (
	leafUnknownKey  = -2
	leafNoSegment   = -3
	leafOtherFailed = -1
)

// leafErrorBody is Spring Boot's error body, with the API's code.
type leafErrorBody struct {
	Timestamp string `json:"timestamp"`
	Status    int    `json:"status"`
	Error     string `json:"error"`
	Message   string `json:"message"`
	Path      string `json:"path"`
	Code      Code   `json:"code"`
}

// leafAllow is the Allow header of Spring's answer to OPTIONS on a path
// mapped without a method (Spring 4.3's implicit OPTIONS: every method but
// TRACE).
const leafAllow = "GET,HEAD,POST,PUT,PATCH,DELETE,OPTIONS"

// leafOptions answers OPTIONS on a Leaf path as Spring 4.3 (Spring Boot
// 1.5) does for a @RequestMapping without a method: 200, Allow, no body;
// the handler does not run, so no ID is taken.
func leafOptions(w http.ResponseWriter) {
	w.Header().Set("Allow", leafAllow)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// leafSlash returns the pattern that matches pattern's path with a
// trailing slash, and only that: Spring Boot 1.5 matches
// /api/segment/get/k/ as /api/segment/get/k (useTrailingSlashMatch),
// but not /api/segment/get/k/x.
func leafSlash(pattern string) string { return pattern + "/{$}" }

func writeLeafError(w http.ResponseWriter, r *http.Request, ae *apiError) {
	if ae.status == http.StatusUnauthorized || ae.status == http.StatusForbidden || ae.status == http.StatusMethodNotAllowed {
		writeError(w, ae)
		return
	}
	id := leafOtherFailed
	switch ae.code {
	case CodeUnknownSequence, CodeInvalidName:
		id = leafUnknownKey
	case CodeUnavailable, CodeExhausted, CodeNoNodeLease, CodeClock, CodeShuttingDown:
		id = leafNoSegment
	}
	b, _ := json.Marshal(leafErrorBody{
		Timestamp: time.Now().UTC().Format("2006-01-02T15:04:05.000+00:00"),
		Status:    http.StatusInternalServerError,
		Error:     "Internal Server Error",
		Message:   "Result{id=" + strconv.Itoa(id) + ", status=EXCEPTION}",
		Path:      r.URL.Path,
		Code:      ae.code,
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusInternalServerError)
	_, _ = w.Write(b)
}

func writeLeafID(w http.ResponseWriter, id int64) {
	b := strconv.AppendInt(nil, id, 10)
	w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// handleLeafSegment is Leaf's segment mode: the key is a sequence's name
// (Leaf's biz_tag). A key that is not a valid name (validateName) names
// no sequence, so it is answered as an unknown key is, and as Leaf
// answers a biz_tag it does not have: Leaf's error with Result{id=-2}
// (writeLeafError), here with the code invalid_name rather than
// unknown_sequence. Such a key costs nothing: it is refused before any
// store call.
func (s *Service) handleLeafSegment(w http.ResponseWriter, r *http.Request) error {
	key := r.PathValue("key")
	if err := validateName(key); err != nil {
		return err
	}
	ids, err := s.NextSequence(r.Context(), key, 1)
	if err != nil {
		return err
	}
	writeLeafID(w, ids[0])
	return nil
}

// handleLeafSnowflake is Leaf's snowflake mode: an ID of the 63-bit layout
// (Leaf's own split: 41 bits of milliseconds, 10 of node, 12 of counter).
// Leaf ignores the key; so does this: any key is taken, of any bytes
// (order:id, Chinese, percent-encoded) and any length. An empty key does
// not reach it (the path then names no route: 404, as in Spring).
func (s *Service) handleLeafSnowflake(w http.ResponseWriter, r *http.Request) error {
	ids, err := s.NextTimeshard(r.Context(), leafLayout, 1)
	if err != nil {
		return err
	}
	if len(ids) != 1 {
		return errors.New("idservice: no ID made")
	}
	writeLeafID(w, ids[0])
	return nil
}
