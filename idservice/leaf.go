package idservice

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"
)

// Meituan Leaf's two paths answer as Leaf's LeafController does, whose
// @RequestMapping names no method: any method is answered as GET (OPTIONS
// as Spring answers it: leafOptions), and the path with a trailing slash
// as the path (Spring Boot 1.5 matches it). They answer the ID as a
// plain-text body (Spring's String answer, text/plain), and an error as
// Leaf does: its controller throws LeafServerException with Leaf's
// Result.toString as its message, which Spring Boot 1.5 (Leaf's) answers
// 500 with its error body (writeLeafError):
//
//	{"timestamp":1764302353139,"status":500,"error":"Internal Server Error",
//	 "exception":"com.sankuai.inf.leaf.server.exception.LeafServerException",
//	 "message":"Result{id=-2, status=EXCEPTION}","path":"/api/segment/get/k",
//	 "code":"unknown_sequence"}
//
// Leaf's exception IDs: -2 the key does not exist (here also: a key that
// is not a valid name, and a retired sequence, as Leaf answers a biz_tag
// removed from its table), -3 no segment could be loaded (here: the store is
// unavailable or the sequence is exhausted), -1 any other failure. The
// body also carries this API's "code". Auth errors (401, 403) answer as
// every route does: Leaf has no authentication.
const (
	leafUnknownKey  = -2
	leafNoSegment   = -3
	leafOtherFailed = -1
)

// leafException is the Java class the error body names: Leaf's own, which
// its controller throws for a Result of status EXCEPTION.
const leafException = "com.sankuai.inf.leaf.server.exception.LeafServerException"

// springErrorBody is Spring Boot 1.5's error body (DefaultErrorAttributes,
// its fields in its order), with the API's code.
type springErrorBody struct {
	Timestamp int64  `json:"timestamp"` // milliseconds since the Unix epoch (a java.util.Date as Jackson writes it)
	Status    int    `json:"status"`
	Error     string `json:"error"`     // the status's reason phrase
	Exception string `json:"exception"` // the Java exception's class
	Message   string `json:"message"`
	Path      string `json:"path"` // the request's path as sent (Spring's request URI)
	Code      Code   `json:"code"`
}

// leafJSONType is the content type of Spring 4.3's JSON answers.
const leafJSONType = "application/json;charset=UTF-8"

// writeSpringError answers status with Spring Boot 1.5's error body.
func writeSpringError(w http.ResponseWriter, r *http.Request, status int, exception, message string, code Code) {
	writeLeafJSON(w, status, springErrorBody{
		Timestamp: time.Now().UnixMilli(),
		Status:    status,
		Error:     http.StatusText(status),
		Exception: exception,
		Message:   message,
		Path:      r.URL.EscapedPath(),
		Code:      code,
	})
}

// writeLeafJSON answers status with v in JSON as Spring 4.3's Jackson
// writes it: application/json;charset=UTF-8, no HTML escaping (& < > as
// they are), no trailing newline.
func writeLeafJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		writeError(w, newError(http.StatusInternalServerError, CodeInternal, "encoding the response failed: %v", err))
		return
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	w.Header().Set("Content-Type", leafJSONType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeLeafError answers ae on a Leaf path as Leaf does: 500, Spring Boot
// 1.5's body naming LeafServerException, whose message is Leaf's Result
// with the exception ID ae's code maps to. On a monitor page (page) the
// body carries ae's message and exception (LeafServerException when it
// names none), and ae's status when it is a 4xx (else 500: Spring Boot
// answers an exception without a status so). 401 and 403 are answered as
// on every route (Leaf has no authentication).
func writeLeafError(w http.ResponseWriter, r *http.Request, ae *apiError, page bool) {
	if ae.status == http.StatusUnauthorized || ae.status == http.StatusForbidden {
		writeError(w, ae)
		return
	}
	if page {
		status, exception := ae.status, ae.exception
		if status < 400 || status >= 500 {
			status = http.StatusInternalServerError
		}
		if exception == "" {
			exception = leafException
		}
		writeSpringError(w, r, status, exception, ae.message, ae.code)
		return
	}
	id := leafOtherFailed
	switch ae.code {
	case CodeUnknownSequence, CodeInvalidName, CodeRetired:
		id = leafUnknownKey
	case CodeUnavailable, CodeExhausted, CodeNoNodeLease, CodeClock, CodeShuttingDown:
		id = leafNoSegment
	}
	writeSpringError(w, r, http.StatusInternalServerError, leafException,
		"Result{id="+strconv.Itoa(id)+", status=EXCEPTION}", ae.code)
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

func writeLeafID(w http.ResponseWriter, id int64) {
	b := strconv.AppendInt(nil, id, 10)
	setBodyHeaders(w, "text/plain;charset=UTF-8", len(b))
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
func (s *Service) handleLeafSegment(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	key := r.PathValue("key")
	if err := validateName(key); err != nil {
		return err
	}
	ids, err := s.NextSequence(ctx, key, 1)
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
func (s *Service) handleLeafSnowflake(ctx context.Context, w http.ResponseWriter, r *http.Request) error {
	ids, err := s.NextTimeshard(ctx, leafLayout, 1)
	if err != nil {
		return err
	}
	if len(ids) != 1 {
		return errors.New("idservice: no ID made")
	}
	writeLeafID(w, ids[0])
	return nil
}
