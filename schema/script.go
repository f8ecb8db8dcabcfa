package schema

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// scriptFS holds the scripts: cql/NNNN_name.cql for every engine, and
// cql/<engine>/NNNN_name.cql replacing the file of the same name on that
// engine.
//
//go:embed cql/*.cql cql/scylla/*.cql
var scriptFS embed.FS

// ScriptKeyspace is the keyspace name the scripts are written with. Apply
// replaces every unquoted identifier cqlseq (outside strings and comments)
// with Options.Keyspace; the scripts use the word for nothing else.
const ScriptKeyspace = "cqlseq"

// Script is one schema script.
type Script struct {
	// Version is the file name's number. Version 0 creates the keyspace;
	// it is applied only with Options.CreateKeyspace and never recorded.
	Version int
	// Name is the file name, e.g. "0002_values.cql".
	Name string
	// Path is the file's path in the embedded tree, e.g.
	// "cql/scylla/0000_keyspace.cql".
	Path string
	// Checksum is the hex SHA-256 of the file's bytes, as recorded in the
	// version table.
	Checksum string
	// Source is the file's text.
	Source string

	stmts [][]token
}

var scriptName = regexp.MustCompile(`^([0-9]{4})_[a-z0-9_]+\.cql$`)

// Scripts returns the scripts for engine ("cassandra" or "scylla") in
// version order.
func Scripts(engine string) ([]Script, error) {
	if !slices.Contains(engines, engine) {
		return nil, fmt.Errorf("schema: unknown engine %q (want one of %v)", engine, engines)
	}
	return loadScripts(scriptFS, "cql", engine)
}

// loadScripts reads dir/*.cql and the overrides in dir/<engine>/, parses and
// checks them: names NNNN_name.cql, versions 0..n without gaps, script 0 one
// CREATE KEYSPACE statement with a replication map, no other script creating
// or dropping a keyspace, every script at least one statement, overrides only
// of existing names, no unknown engine folders.
func loadScripts(fsys fs.FS, dir, engine string) ([]Script, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("schema: reading scripts: %w", err)
	}
	var errs []error
	byName := map[string]string{} // file name -> path
	for _, e := range entries {
		switch {
		case e.IsDir():
			if !slices.Contains(engines, e.Name()) {
				errs = append(errs, fmt.Errorf("schema: script folder %s/%s is not an engine %v", dir, e.Name(), engines))
			}
		case strings.HasSuffix(e.Name(), ".cql"):
			byName[e.Name()] = path.Join(dir, e.Name())
		}
	}
	if sub, err := fs.ReadDir(fsys, path.Join(dir, engine)); err == nil {
		for _, e := range sub {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".cql") {
				continue
			}
			if _, ok := byName[e.Name()]; !ok {
				errs = append(errs, fmt.Errorf("schema: %s/%s/%s overrides no script of %s", dir, engine, e.Name(), dir))
				continue
			}
			byName[e.Name()] = path.Join(dir, engine, e.Name())
		}
	}
	var out []Script
	for name, p := range byName {
		m := scriptName.FindStringSubmatch(name)
		if m == nil {
			errs = append(errs, fmt.Errorf("schema: script name %s does not match NNNN_name.cql (lower case)", p))
			continue
		}
		v, _ := strconv.Atoi(m[1])
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			errs = append(errs, fmt.Errorf("schema: %w", err))
			continue
		}
		sc, err := parseScript(v, name, p, b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, sc)
	}
	slices.SortFunc(out, func(a, b Script) int { return a.Version - b.Version })
	for i, sc := range out {
		if sc.Version != i {
			errs = append(errs, fmt.Errorf("schema: scripts must be numbered 0000, 0001, ... without gaps or repeats; found %s at position %d", sc.Path, i))
			break
		}
	}
	if len(out) == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("schema: no scripts in %s", dir))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// parseScript lexes one script and checks its statements.
func parseScript(version int, name, p string, src []byte) (Script, error) {
	sum := sha256.Sum256(src)
	sc := Script{Version: version, Name: name, Path: p, Checksum: hex.EncodeToString(sum[:]), Source: string(src)}
	toks, err := lex(sc.Source)
	if err != nil {
		return Script{}, fmt.Errorf("schema: %s: %w", p, err)
	}
	sc.stmts = splitStatements(toks)
	if len(sc.stmts) == 0 {
		return Script{}, fmt.Errorf("schema: %s: no statement", p)
	}
	for i, st := range sc.stmts {
		keyspaceDDL := isKeyspaceDDL(st)
		switch {
		case version == 0 && (len(sc.stmts) != 1 || !keyspaceDDL || !words(st, 1)[0].is("CREATE")):
			return Script{}, fmt.Errorf("schema: %s: script 0 must be exactly one CREATE KEYSPACE statement", p)
		case version == 0:
			if _, _, err := replicationSpan(st); err != nil {
				return Script{}, fmt.Errorf("schema: %s: %w", p, err)
			}
		case keyspaceDDL:
			return Script{}, fmt.Errorf("schema: %s: statement %d: only script 0 may create, alter or drop the keyspace", p, i+1)
		}
	}
	return sc, nil
}

// isKeyspaceDDL reports whether a statement is CREATE/ALTER/DROP KEYSPACE.
func isKeyspaceDDL(stmt []token) bool {
	w := words(stmt, 2)
	return len(w) == 2 && (w[0].is("CREATE") || w[0].is("ALTER") || w[0].is("DROP")) && w[1].is("KEYSPACE")
}

// replicationSpan finds the map literal after "replication =" and returns
// the indexes of its opening and closing braces in stmt.
func replicationSpan(stmt []token) (open, end int, err error) {
	var sig []int // indexes of significant tokens
	for i, t := range stmt {
		if t.significant() {
			sig = append(sig, i)
		}
	}
	for k := 0; k+2 < len(sig); k++ {
		if !stmt[sig[k]].is("replication") || !stmt[sig[k+1]].is("=") || !stmt[sig[k+2]].is("{") {
			continue
		}
		for m := k + 3; m < len(sig); m++ {
			if stmt[sig[m]].is("{") {
				break // maps do not nest in a replication map
			}
			if stmt[sig[m]].is("}") {
				return sig[k+2], sig[m], nil
			}
		}
		break
	}
	return 0, 0, errors.New("no replication = {...} map in the keyspace statement")
}

// Statements returns the script's statements as sent to the server: the
// keyspace word replaced by keyspace, and in script 0 the replication map
// replaced by replication, comments dropped. keyspace and replication must
// have passed Options.Validate.
func (sc Script) Statements(keyspace, replication string) []string {
	out := make([]string, 0, len(sc.stmts))
	for _, st := range sc.stmts {
		st = slices.Clone(st)
		for i, t := range st {
			if t.kind == tokWord && strings.EqualFold(t.text, ScriptKeyspace) {
				st[i] = token{kind: tokWord, text: keyspace}
			}
		}
		if sc.Version == 0 {
			if open, end, err := replicationSpan(st); err == nil {
				st = slices.Replace(st, open, end+1, token{kind: tokPunct, text: replication})
			}
		}
		out = append(out, render(st))
	}
	return out
}

var replicationValue = regexp.MustCompile(`^[A-Za-z0-9_.\-]+$`)

// normalizeReplication checks a replication map literal, e.g.
// {'class': 'NetworkTopologyStrategy', 'dc1': 3}: string keys, string or
// integer values, keys and values of letters, digits, '_', '.', '-' only,
// a 'class' key, no repeated key. It returns the map in one canonical
// spelling.
func normalizeReplication(s string) (string, error) {
	toks, err := lex(s)
	if err != nil {
		return "", fmt.Errorf("replication %q: %w", s, err)
	}
	var sig []token
	for _, t := range toks {
		if t.kind == tokComment {
			return "", fmt.Errorf("replication %q: comments are not allowed", s)
		}
		if t.significant() {
			sig = append(sig, t)
		}
	}
	bad := func(why string) (string, error) {
		return "", fmt.Errorf("replication %q: %s; want a map like {'class': 'SimpleStrategy', 'replication_factor': 1}", s, why)
	}
	if len(sig) < 2 || !sig[0].is("{") || !sig[len(sig)-1].is("}") {
		return bad("not a {...} map")
	}
	body := sig[1 : len(sig)-1]
	var parts []string
	seen := map[string]bool{}
	for len(body) > 0 {
		if len(body) < 3 || body[0].kind != tokString || !body[1].is(":") || body[2].kind != tokString && body[2].kind != tokNumber {
			return bad("entries must be 'key': 'value' or 'key': integer")
		}
		key, val := unquote(body[0].text), body[2].text
		if body[2].kind == tokString {
			val = unquote(val)
		} else if _, err := strconv.ParseUint(val, 10, 16); err != nil {
			return bad(fmt.Sprintf("%s is not a small non-negative integer", val))
		}
		if !replicationValue.MatchString(key) || !replicationValue.MatchString(val) {
			return bad(fmt.Sprintf("'%s': '%s' has characters other than letters, digits, '_', '.', '-'", key, val))
		}
		if seen[strings.ToLower(key)] {
			return bad(fmt.Sprintf("key '%s' repeated", key))
		}
		seen[strings.ToLower(key)] = true
		if body[2].kind == tokString {
			val = "'" + val + "'"
		}
		parts = append(parts, fmt.Sprintf("'%s': %s", key, val))
		body = body[3:]
		if len(body) > 0 {
			if !body[0].is(",") || len(body) == 1 {
				return bad("entries must be separated by single commas")
			}
			body = body[1:]
		}
	}
	if !seen["class"] {
		return bad("no 'class' key")
	}
	return "{" + strings.Join(parts, ", ") + "}", nil
}

// unquote strips the quotes of a 'string' token; doubled quotes stay
// doubled, which the value check then rejects.
func unquote(s string) string { return s[1 : len(s)-1] }
