package idservice

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
)

// Scope is what a bearer token may do.
type Scope uint8

// Scopes. ScopeAdmin includes ScopeIssue.
const (
	// ScopeNone marks the routes open to everyone (/healthz, /readyz,
	// /metrics).
	ScopeNone Scope = iota
	// ScopeIssue: take IDs, read a sequence's definition and state, list
	// the sequences and the layouts, decompose an ID.
	ScopeIssue
	// ScopeAdmin: everything ScopeIssue may, and create, alter and retire
	// sequences.
	ScopeAdmin
)

func (s Scope) String() string {
	switch s {
	case ScopeIssue:
		return "issue"
	case ScopeAdmin:
		return "admin"
	}
	return "none"
}

// MinTokenLen is the shortest token a token file may hold, in bytes.
const MinTokenLen = 16

// Tokens are the bearer tokens the service accepts and their scopes. Only
// the tokens' SHA-256 digests are kept.
type Tokens struct {
	scopes map[[sha256.Size]byte]Scope
	counts map[Scope]int
}

// ParseTokens reads a token file: one token a line as "SCOPE TOKEN", SCOPE
// being issue or admin, TOKEN at least MinTokenLen printable ASCII
// characters without spaces; blank lines and lines starting with # are
// ignored. Every problem is reported at once (by line number, never with
// the token); each error wraps ErrInvalidTokens. A file without a token is
// an error: no authentication is asked for by giving no file.
func ParseTokens(r io.Reader) (*Tokens, error) {
	t := &Tokens{scopes: map[[sha256.Size]byte]Scope{}, counts: map[Scope]int{}}
	var errs []error
	bad := func(line int, format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: line %d: "+format, append([]any{ErrInvalidTokens, line}, a...)...))
	}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			bad(n, "want \"SCOPE TOKEN\" (2 fields), got %d fields", len(f))
			continue
		}
		var s Scope
		switch f[0] {
		case "issue":
			s = ScopeIssue
		case "admin":
			s = ScopeAdmin
		default:
			bad(n, "scope %q: want issue or admin", f[0])
			continue
		}
		tok := f[1]
		if len(tok) < MinTokenLen || !printable(tok) {
			bad(n, "the token must be at least %d printable ASCII characters", MinTokenLen)
			continue
		}
		h := sha256.Sum256([]byte(tok))
		if _, dup := t.scopes[h]; dup {
			bad(n, "the token is given twice")
			continue
		}
		t.scopes[h] = s
		t.counts[s]++
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidTokens, err))
	}
	if len(errs) == 0 && len(t.scopes) == 0 {
		errs = append(errs, fmt.Errorf("%w: no token", ErrInvalidTokens))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return t, nil
}

// ReadTokens reads the token file at path (ParseTokens).
func ReadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("idservice: token file: %w", err)
	}
	defer f.Close()
	t, err := ParseTokens(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

// Count returns the number of tokens of scope s.
func (t *Tokens) Count(s Scope) int { return t.counts[s] }

// authorize checks r's bearer token against scope need. A nil t lets
// everything through.
func (t *Tokens) authorize(r *http.Request, need Scope) *apiError {
	return t.authorizeHeader(r.Header, need)
}

// authorizeHeader checks the bearer token of hdr's Authorization field
// (bearerToken) against scope need: none or an unknown token is
// unauthenticated (401), a token without the scope forbidden (403). A nil
// t lets everything through. The HTTP routes (authorize) and the gRPC
// methods (unary, the call's metadata) both check tokens here.
func (t *Tokens) authorizeHeader(hdr http.Header, need Scope) *apiError {
	if t == nil || need == ScopeNone {
		return nil
	}
	tok, ok := bearerToken(hdr.Get("Authorization"))
	if !ok {
		return newError(http.StatusUnauthorized, CodeUnauthenticated, "a bearer token is required (Authorization: Bearer TOKEN)")
	}
	got, ok := t.scopes[sha256.Sum256([]byte(tok))]
	if !ok {
		return newError(http.StatusUnauthorized, CodeUnauthenticated, "the bearer token is not known")
	}
	if got < need {
		return newError(http.StatusForbidden, CodeForbidden, "the token's scope %s does not allow this: it needs %s", got, need)
	}
	return nil
}

// bearerToken returns the token of an Authorization field value of the
// Bearer scheme: the scheme in any case (RFC 7235 section 2.1: "Bearer",
// "bearer", "BEARER", ...), then one or more spaces or tabs, then the
// token; spaces and tabs around the value are ignored. ok is false for
// another scheme, a scheme without a token, or a scheme not followed by a
// space ("BearerTOKEN"). The token is returned as sent: one with spaces
// inside is no token of a token file and so is unknown.
func bearerToken(h string) (tok string, ok bool) {
	h = strings.Trim(h, " \t")
	i := strings.IndexAny(h, " \t")
	if i < 0 || !strings.EqualFold(h[:i], "Bearer") {
		return "", false
	}
	tok = strings.TrimLeft(h[i:], " \t")
	return tok, tok != ""
}
