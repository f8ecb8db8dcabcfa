// Package ops holds the operations files (Prometheus alert rules, their
// promtool tests, a Grafana dashboard); its test checks that every metric,
// label and label value they name is one the metrics package or the ID
// service (package idservice, cqlseq serve's /metrics) exports.
package ops

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.yaml.in/yaml/v3"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/idservice"
	"github.com/cqlseq/cqlseq/metrics"
	"github.com/cqlseq/cqlseq/storage/mem"
)

const (
	rulesFile     = "prometheus/cqlseq-alerts.yml"
	rulesTestFile = "prometheus/cqlseq-alerts_test.yml"
	dashboardFile = "grafana/cqlseq-dashboard.json"
)

// targetLabels are added by Prometheus at scrape time; their values are
// the user's.
var targetLabels = []string{"job", "instance"}

// openLabels take any value: partition IDs, histogram bucket bounds, the
// service's sequence names. The other labels' values (op, reason, kind,
// route, code, layout) are fixed by the code and checked.
var openLabels = []string{"partition", "le", "sequence"}

// series is one exported series name (a histogram exports three) and its
// labels with the values the metrics package produces.
type series struct {
	labels map[string]map[string]bool
}

// catalog is what the metrics package and the ID service export: series
// names, and family names (which prose may mention; a histogram's family
// name selects nothing).
type catalog struct {
	series   map[string]series
	families map[string]bool
}

// exported builds the catalog from the metrics package itself: it binds a
// partition, a store and host health on a fresh registry, records a
// sequencer storage error for every operation isequencer names, and
// gathers; then from an ID service on the mem store (serviceFamilies).
func exported(t *testing.T) catalog {
	t.Helper()
	reg := prometheus.NewRegistry()
	c, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Partition(1, 1)
	for _, op := range sequencerOps(t) {
		m.StorageError(op)
	}
	for _, r := range []apppart.StopReason{apppart.StopConflict, apppart.StopFenced} {
		m.Stopped(r) // binds each reason's series
	}
	c.Storage(nil) // binds every operation's children; no call is made
	c.Leadership() // binds every event kind's child
	if err := c.RegisterHostHealth(func() metrics.HostHealth { return metrics.HostHealth{} }); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	cat := catalog{series: map[string]series{}, families: map[string]bool{}}
	cat.add(mfs)
	if len(cat.series) == 0 {
		t.Fatal("the metrics package exported nothing")
	}
	n := len(cat.series)
	cat.add(serviceFamilies(t))
	if len(cat.series) == n {
		t.Fatal("the ID service exported nothing")
	}
	// The service's route and code labels take the values the code can
	// produce, not only those of the requests made here.
	routes := map[string]bool{}
	for _, r := range serviceRoutes(t) {
		routes[r] = true
	}
	codes := map[string]bool{}
	for c := 100; c < 600; c++ {
		if http.StatusText(c) != "" {
			codes[strconv.Itoa(c)] = true
		}
	}
	for name, s := range cat.series {
		if !strings.HasPrefix(name, "cqlseq_service_") {
			continue
		}
		if _, ok := s.labels["route"]; ok {
			s.labels["route"] = routes
		}
		if _, ok := s.labels["code"]; ok {
			s.labels["code"] = codes
		}
	}
	return cat
}

// add adds gathered families to the catalog.
func (cat catalog) add(mfs []*dto.MetricFamily) {
	for _, mf := range mfs {
		name := mf.GetName()
		cat.families[name] = true
		labels := map[string]map[string]bool{}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] == nil {
					labels[lp.GetName()] = map[string]bool{}
				}
				labels[lp.GetName()][lp.GetValue()] = true
			}
		}
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			bucket := map[string]map[string]bool{"le": nil} // nil: any value
			for k, v := range labels {
				bucket[k] = v
			}
			cat.series[name+"_bucket"] = series{bucket}
			cat.series[name+"_sum"] = series{labels}
			cat.series[name+"_count"] = series{labels}
			continue
		}
		cat.series[name] = series{labels}
	}
}

// serviceFamilies gathers an ID service's metrics (idservice.New on the mem
// store, what cqlseq serve serves on /metrics) after a sequence is created
// and read and one request is answered, so that every family has a series.
func serviceFamilies(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg := prometheus.NewRegistry()
	svc, err := idservice.New(ctx, idservice.Options{
		Store:    mem.New(mem.Options{}),
		Registry: reg,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := svc.Close(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := svc.Create(ctx, "s", idservice.Definition{}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.NextSequence(ctx, "s", 1); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	svc.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /healthz: %d %s", rec.Code, rec.Body)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// serviceRoutes returns the service's route label values: the name fields
// of the route literals (the HTTP routes) and the string constants named
// grpcRoute... (the gRPC methods) in idservice's sources.
func serviceRoutes(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("../idservice/*.go")
	if err != nil {
		t.Fatal(err)
	}
	isRoute := func(e ast.Expr) bool { id, ok := e.(*ast.Ident); return ok && id.Name == "route" }
	var names []string
	addName := func(lit *ast.CompositeLit) {
		for _, el := range lit.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			if key, ok := kv.Key.(*ast.Ident); !ok || key.Name != "name" {
				continue
			}
			if v, ok := kv.Value.(*ast.BasicLit); ok && v.Kind == token.STRING {
				s, err := strconv.Unquote(v.Value)
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, s)
			}
		}
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				for i, id := range vs.Names {
					if !strings.HasPrefix(id.Name, "grpcRoute") || i >= len(vs.Values) {
						continue
					}
					if v, ok := vs.Values[i].(*ast.BasicLit); ok && v.Kind == token.STRING {
						s, err := strconv.Unquote(v.Value)
						if err != nil {
							t.Fatal(err)
						}
						names = append(names, s)
					}
				}
				return true
			}
			lit, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if isRoute(lit.Type) {
				addName(lit)
			}
			if at, ok := lit.Type.(*ast.ArrayType); ok && isRoute(at.Elt) {
				for _, el := range lit.Elts {
					if elem, ok := el.(*ast.CompositeLit); ok && elem.Type == nil {
						addName(elem)
					}
				}
			}
			return true
		})
	}
	if !slices.Contains(names, "sequence_next") || !slices.Contains(names, "not_found") {
		t.Fatalf("found no route names in idservice (got %q)", names)
	}
	return names
}

// sequencerOps returns the op label values isequencer passes to
// Metrics.StorageError: the string constants named op... in its sources.
func sequencerOps(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("../isequencer/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var ops []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !strings.HasPrefix(n.Name, "op") || i >= len(vs.Values) {
						continue
					}
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, err := strconv.Unquote(lit.Value)
						if err != nil {
							t.Fatal(err)
						}
						ops = append(ops, s)
					}
				}
			}
		}
	}
	if len(ops) == 0 {
		t.Fatal("found no op constants in isequencer")
	}
	return ops
}

// labelKnown reports whether name is a label of some exported series or a
// target label.
func (c catalog) labelKnown(name string) bool {
	if slices.Contains(targetLabels, name) {
		return true
	}
	for _, s := range c.series {
		if _, ok := s.labels[name]; ok {
			return true
		}
	}
	return false
}

// checkExpr returns the problems of one PromQL expression (Grafana
// variables allowed): unknown series, unknown labels on a series, and
// label values no series has.
func (c catalog) checkExpr(expr string) []string {
	if m := labelValuesRE.FindStringSubmatch(strings.TrimSpace(expr)); m != nil {
		probs := c.checkExpr(m[1])
		if !c.labelKnown(m[2]) {
			probs = append(probs, fmt.Sprintf("unknown label %q", m[2]))
		}
		return probs
	}
	toks, err := lex(expr)
	if err != nil {
		return []string{err.Error()}
	}
	var probs []string
	for i := 0; i < len(toks); i++ {
		tk := toks[i]
		next := func(k int) tok {
			if i+k < len(toks) {
				return toks[i+k]
			}
			return tok{}
		}
		switch {
		case tk.kind == tIdent && grouping[strings.ToLower(tk.text)] && next(1).text == "(":
			i += 2
			for ; i < len(toks) && toks[i].text != ")"; i++ {
				if toks[i].kind == tIdent && !c.labelKnown(toks[i].text) {
					probs = append(probs, fmt.Sprintf("unknown label %q in %s(...)", toks[i].text, tk.text))
				}
			}
		case tk.kind == tIdent && (keywords[strings.ToLower(tk.text)] || grouping[strings.ToLower(tk.text)] || aggregations[strings.ToLower(tk.text)]):
		case tk.kind == tIdent && next(1).text == "(":
			// a function or aggregation
		case tk.kind == tIdent:
			var ms []matcher
			if next(1).text == "{" {
				ms, i = parseMatchers(toks, i+1, &probs)
			}
			probs = append(probs, c.checkSelector(tk.text, ms)...)
		case tk.text == "{":
			var ms []matcher
			ms, i = parseMatchers(toks, i, &probs)
			probs = append(probs, c.checkSelector("", ms)...)
		}
	}
	return probs
}

var labelValuesRE = regexp.MustCompile(`^label_values\((.+),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)$`)

var grouping = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

var aggregations = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true,
	"stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true}

var keywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true, "atan2": true}

type matcher struct{ label, op, value string }

// parseMatchers parses {label op "value", ...} starting at toks[i] == "{"
// and returns the index of the closing "}".
func parseMatchers(toks []tok, i int, probs *[]string) ([]matcher, int) {
	var ms []matcher
	for i++; i < len(toks) && toks[i].text != "}"; i++ {
		if toks[i].text == "," {
			continue
		}
		if i+2 >= len(toks) || toks[i].kind != tIdent || toks[i+2].kind != tString {
			*probs = append(*probs, fmt.Sprintf("cannot parse the label matchers at %q", toks[i].text))
			for i < len(toks) && toks[i].text != "}" {
				i++
			}
			return ms, i
		}
		ms = append(ms, matcher{toks[i].text, toks[i+1].text, toks[i+2].text})
		i += 2
	}
	return ms, i
}

func (c catalog) checkSelector(name string, ms []matcher) []string {
	var probs []string
	var names []string
	if name != "" {
		names = []string{name}
	}
	for _, m := range ms {
		if m.label != "__name__" {
			continue
		}
		re, err := regexp.Compile("^(?:" + m.value + ")$")
		if err != nil || m.op != "=~" {
			if m.op == "=" {
				names = append(names, m.value)
				continue
			}
			probs = append(probs, fmt.Sprintf("__name__%s%q: use = or a valid =~", m.op, m.value))
			continue
		}
		for n := range c.series {
			if re.MatchString(n) {
				names = append(names, n)
			}
		}
		if len(names) == 0 {
			probs = append(probs, fmt.Sprintf("__name__=~%q matches no cqlseq series", m.value))
		}
	}
	if len(names) == 0 && len(probs) == 0 {
		return []string{"a selector without a metric name"}
	}
	for _, n := range names {
		s, ok := c.series[n]
		if !ok {
			hint := ""
			if c.families[n] {
				hint = " (a histogram: select _bucket, _sum or _count)"
			}
			probs = append(probs, fmt.Sprintf("unknown metric %q%s", n, hint))
			continue
		}
		for _, m := range ms {
			if m.label == "__name__" || slices.Contains(targetLabels, m.label) {
				continue
			}
			values, ok := s.labels[m.label]
			if !ok {
				probs = append(probs, fmt.Sprintf("%s has no label %q", n, m.label))
				continue
			}
			if values == nil || slices.Contains(openLabels, m.label) || strings.Contains(m.value, "$") {
				continue // any value, or a Grafana variable
			}
			if !valueMatches(m, values) {
				probs = append(probs, fmt.Sprintf("%s{%s%s%q}: no series has that %s (it has %s)",
					n, m.label, m.op, m.value, m.label, strings.Join(sortedKeys(values), ", ")))
			}
		}
	}
	return probs
}

// valueMatches reports whether the matcher's value names (=, !=) or
// matches (=~, !~) at least one known value: a matcher on a value no series
// has is a typo even when negated.
func valueMatches(m matcher, values map[string]bool) bool {
	switch m.op {
	case "=", "!=":
		return values[m.value]
	}
	re, err := regexp.Compile("^(?:" + m.value + ")$")
	if err != nil {
		return false
	}
	for v := range values {
		if re.MatchString(v) {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

type tokKind uint8

const (
	tPunct tokKind = iota
	tIdent
	tString
	tNumber
	tVar
)

type tok struct {
	kind tokKind
	text string // a string's text is its unquoted value
}

// lex splits a PromQL expression into tokens. Range and subquery brackets
// ([5m], [$__rate_interval]) are skipped whole; Grafana variables are
// tVar tokens.
func lex(s string) ([]tok, error) {
	var toks []tok
	isIdentStart := func(b byte) bool { return b == '_' || b == ':' || 'a' <= b && b <= 'z' || 'A' <= b && b <= 'Z' }
	isIdent := func(b byte) bool { return isIdentStart(b) || '0' <= b && b <= '9' }
	for i := 0; i < len(s); {
		b := s[i]
		switch {
		case b == ' ' || b == '\t' || b == '\n' || b == '\r':
			i++
		case b == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case b == '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("unclosed [ in %q", s)
			}
			i += j + 1
		case b == '"' || b == '\'' || b == '`':
			j := i + 1
			for j < len(s) && s[j] != b {
				if s[j] == '\\' && b != '`' {
					j++
				}
				j++
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unclosed string in %q", s)
			}
			raw := s[i : j+1]
			v := raw[1 : len(raw)-1]
			if b == '"' {
				u, err := strconv.Unquote(raw)
				if err != nil {
					return nil, fmt.Errorf("bad string %s: %w", raw, err)
				}
				v = u
			}
			toks = append(toks, tok{tString, v})
			i = j + 1
		case b == '$':
			j := i + 1
			if j < len(s) && s[j] == '{' {
				k := strings.IndexByte(s[j:], '}')
				if k < 0 {
					return nil, fmt.Errorf("unclosed ${ in %q", s)
				}
				j += k + 1
			} else {
				for j < len(s) && isIdent(s[j]) {
					j++
				}
			}
			toks = append(toks, tok{tVar, s[i:j]})
			i = j
		case '0' <= b && b <= '9' || b == '.' && i+1 < len(s) && '0' <= s[i+1] && s[i+1] <= '9':
			j := i
			for j < len(s) && (isIdent(s[j]) || s[j] == '.') {
				j++
			}
			toks = append(toks, tok{tNumber, s[i:j]})
			i = j
		case isIdentStart(b):
			j := i
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			toks = append(toks, tok{tIdent, s[i:j]})
			i = j
		default:
			if i+1 < len(s) && strings.Contains("=~ !~ != == >= <=", s[i:i+2]) {
				toks = append(toks, tok{tPunct, s[i : i+2]})
				i += 2
				continue
			}
			toks = append(toks, tok{tPunct, string(b)})
			i++
		}
	}
	return toks, nil
}

// exprs returns every PromQL expression in the ops files, each with where
// it is.
func exprs(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}

	var rules struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert, Record, Expr string
			}
		}
	}
	readYAML(t, rulesFile, &rules)
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out[fmt.Sprintf("%s: %s%s", rulesFile, r.Alert, r.Record)] = r.Expr
		}
	}

	var tests struct {
		Tests []struct {
			InputSeries []struct {
				Series string `yaml:"series"`
			} `yaml:"input_series"`
			PromQLExprTest []struct {
				Expr string `yaml:"expr"`
			} `yaml:"promql_expr_test"`
		}
	}
	readYAML(t, rulesTestFile, &tests)
	for i, tc := range tests.Tests {
		for j, s := range tc.InputSeries {
			out[fmt.Sprintf("%s: test %d series %d", rulesTestFile, i, j)] = s.Series
		}
		for j, e := range tc.PromQLExprTest {
			out[fmt.Sprintf("%s: test %d expr %d", rulesTestFile, i, j)] = e.Expr
		}
	}

	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	walkJSON(dash, dashboardFile, func(where, key, v string) {
		if key == "expr" || key == "query" && strings.HasPrefix(v, "label_values(") {
			out[where] = v
		}
	})
	return out
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// walkJSON calls f for every string value in v, with its path and key.
func walkJSON(v any, where string, f func(where, key, v string)) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok {
				f(where+"."+k, k, s)
				continue
			}
			name := where + "." + k
			if m, ok := e.(map[string]any); ok && m["title"] != nil {
				name += fmt.Sprintf("[%v]", m["title"])
			}
			walkJSON(e, name, f)
		}
	case []any:
		for i, e := range v {
			name := fmt.Sprintf("%s[%d]", where, i)
			if m, ok := e.(map[string]any); ok {
				if title, ok := m["title"].(string); ok {
					name = fmt.Sprintf("%s[%q]", where, title)
				} else if n, ok := m["name"].(string); ok {
					name = fmt.Sprintf("%s[%q]", where, n)
				}
			}
			walkJSON(e, name, f)
		}
	}
}

// TestMetricNames checks every expression of the rules, their tests and
// the dashboard, and every cqlseq_ name in the ops files' text (rule
// annotations, panel descriptions, the README), against what the metrics
// package and the ID service export.
func TestMetricNames(t *testing.T) {
	cat := exported(t)
	all := exprs(t)
	if len(all) < 20 {
		t.Fatalf("found only %d expressions in the ops files", len(all))
	}
	for _, where := range sortedKeys(boolKeys(all)) {
		for _, p := range cat.checkExpr(all[where]) {
			t.Errorf("%s: %s\n\t%s", where, p, all[where])
		}
	}

	nameRE := regexp.MustCompile(`\bcqlseq_[a-z0-9_]*[a-z0-9]`)
	for _, path := range []string{rulesFile, rulesTestFile, dashboardFile, "README.md"} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range nameRE.FindAllString(string(b), -1) {
			if _, ok := cat.series[n]; !ok && !cat.families[n] {
				t.Errorf("%s: names %q, which neither the metrics package nor the ID service exports", path, n)
			}
		}
	}
}

func boolKeys(m map[string]string) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// TestCheckExpr shows the check catching each kind of mistake.
func TestCheckExpr(t *testing.T) {
	cat := exported(t)
	for _, tt := range []struct {
		expr  string
		wprob string // "" for none
	}{
		{`sum by (partition) (rate(cqlseq_sequencer_transactions_total{instance=~"$instance", partition=~"$partition"}[$__rate_interval]))`, ""},
		{`histogram_quantile(0.99, sum by (le, op) (rate(cqlseq_storage_call_seconds_bucket[5m])))`, ""},
		{`rate(cqlseq_sequencer_busy_total[5m]) > 0 and ignoring (reason) rate(cqlseq_sequencer_transactions_total[5m]) == 0`, ""},
		{`rate(cqlseq_sequencer_storage_errors_total{op="WriteValuesAndNextPLogOffset"}[2m]) > 0`, ""},
		{`label_values({__name__=~"cqlseq_.+"}, instance)`, ""},
		{`label_values(cqlseq_sequencer_transactions_total{instance=~"$instance"}, partition)`, ""},
		{`cqlseq_storage_errors_total{job="cqlseq",instance="app-1:9100",op="PutBatch"}`, ""},
		{`rate(cqlseq_sequencer_transaction_total[5m])`, `unknown metric "cqlseq_sequencer_transaction_total"`},
		{`rate(cqlseq_storage_call_seconds[5m])`, `unknown metric "cqlseq_storage_call_seconds" (a histogram`},
		{`rate(cqlseq_sequencer_busy_total{partiton="1"}[5m])`, `has no label "partiton"`},
		{`rate(cqlseq_sequencer_busy_total{reason="flushing"}[5m])`, `no series has that reason`},
		{`rate(cqlseq_sequencer_storage_errors_total{op="Flush"}[5m])`, `no series has that op`},
		{`rate(cqlseq_sequencer_storage_errors_total{op!="WriteValues"}[5m])`, `no series has that op`},
		{`sum by (partion) (rate(cqlseq_sequencer_busy_total[5m]))`, `unknown label "partion"`},
		{`label_values(cqlseq_sequencer_transactions_total, partitions)`, `unknown label "partitions"`},
		{`label_values({__name__=~"cqlsq_.+"}, instance)`, `matches no cqlseq series`},
		{`sum by (route, code) (rate(cqlseq_service_requests_total{route=~"sequence_next|leaf_segment", code=~"5.."}[5m]))`, ""},
		{`histogram_quantile(0.99, sum by (le, route) (rate(cqlseq_service_request_duration_seconds_bucket{route!="metrics"}[5m])))`, ""},
		{`cqlseq_service_node_lease_held{layout="53"} == 0`, ""},
		{`rate(cqlseq_service_chunk_fetches_total{sequence="orders"}[5m])`, ""},
		{`rate(cqlseq_service_request_total[5m])`, `unknown metric "cqlseq_service_request_total"`},
		{`rate(cqlseq_service_request_duration_seconds[5m])`, `unknown metric "cqlseq_service_request_duration_seconds" (a histogram`},
		{`rate(cqlseq_service_requests_total{route=~"sequence_next|grpc_sequence_next"}[5m])`, ""},
		{`rate(cqlseq_service_requests_total{route="sequence_nxt"}[5m])`, `no series has that route`},
		{`rate(cqlseq_service_requests_total{route="grpc_next"}[5m])`, `no series has that route`},
		{`rate(cqlseq_service_requests_total{code=~"5xx"}[5m])`, `no series has that code`},
		{`cqlseq_service_node_lease_held{layout="64"}`, `no series has that layout`},
		{`cqlseq_service_ready{route="readyz"}`, `has no label "route"`},
	} {
		probs := cat.checkExpr(tt.expr)
		if tt.wprob == "" {
			if len(probs) > 0 {
				t.Errorf("%s: want no problem, got %q", tt.expr, probs)
			}
			continue
		}
		if !slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, tt.wprob) }) {
			t.Errorf("%s: want a problem containing %q, got %q", tt.expr, tt.wprob, probs)
		}
	}
}
