// Package consumer builds a module outside this repository that depends on
// cqlseq as a user's module would (issue 50): the commit's files, as `git
// archive` gives them, are served as a module version from a local
// GOPROXY directory, and a fresh consumer module imports apppart,
// storage/cql, storage/boltdb, metrics and idservice with `go get` and `go
// build` and the go.mod lines the README's "Depending on it" names, nothing
// else. The consumer's program is the README's library example with
// cql.Open in place of the in-memory store; it runs against the test
// cluster and must print what the README says (offset 1, numbers [1000 1]).
//
// The same build without the README's lines is tried first and its output
// logged: what a consumer that reads nothing sees.
package consumer

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/integration/itest"
)

func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }

const modulePath = "github.com/cqlseq/cqlseq"

func TestAConsumerModuleBuildsAndRunsTheLibraryExample(t *testing.T) {
	for _, tool := range []string{"git", "go"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "the consumer check needs %s on PATH", tool)
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)

	work := t.TempDir()
	version := serveCommit(t, root, filepath.Join(work, "proxy"))
	t.Logf("serving %s@%s (git archive of HEAD) from a local GOPROXY directory", modulePath, version)

	example, err := libraryExample(string(readme))
	require.NoError(t, err)
	lines, err := consumerGoModLines(string(readme))
	require.NoError(t, err)
	t.Logf("README, Depending on it: %d go.mod line(s): %q", len(lines), lines)

	env := append(os.Environ(),
		"GOPROXY=file://"+filepath.Join(work, "proxy")+","+goEnv(t, "GOPROXY"),
		"GONOSUMDB="+modulePath, "GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off",
	)

	// Without the README's lines: logged, not judged (it is what a
	// consumer who has not read the README sees).
	if len(lines) > 0 {
		bare := newConsumer(t, filepath.Join(work, "bare"), example, nil)
		out, err := run(bare, env, "go", "get", modulePath+"@"+version)
		if err == nil {
			out, err = run(bare, env, "go", "build", "./...")
		}
		t.Logf("without the README's go.mod lines: err=%v\n%s", err, lastLines(out, 6))
	}

	dir := newConsumer(t, filepath.Join(work, "consumer"), example, lines)
	out, err := run(dir, env, "go", "get", modulePath+"@"+version)
	require.NoError(t, err, "go get in the consumer module:\n%s", out)
	out, err = run(dir, env, "go", "mod", "tidy")
	require.NoError(t, err, "go mod tidy in the consumer module:\n%s", out)
	bin := filepath.Join(work, "consumer-bin")
	out, err = run(dir, env, "go", "build", "-o", bin, ".")
	require.NoError(t, err, "go build in the consumer module:\n%s", out)
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	t.Logf("the consumer's go.mod:\n%s", gomod)

	ks := itest.NewKeyspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, strings.Join(itest.Hosts(), ","), ks)
	got, err := cmd.CombinedOutput()
	require.NoError(t, err, "the consumer's program:\n%s", got)
	t.Logf("the consumer's program printed: %s", strings.TrimSpace(string(got)))
	require.Contains(t, string(got), "offset 1 numbers [1000 1]", "the README's comment: res.Offset == 1, res.Numbers == [1000 1]")
}

// serveCommit writes HEAD's files (git archive) as a module version into
// the GOPROXY directory proxy and returns the version: a pseudo-version of
// HEAD's commit time and hash.
func serveCommit(t *testing.T, root, proxy string) string {
	t.Helper()
	out, err := run(root, nil, "git", "log", "-1", "--format=%cd %H", "--date=format-local:%Y%m%d%H%M%S")
	require.NoError(t, err, "git log in %s (the check needs a git checkout):\n%s", root, out)
	f := strings.Fields(out)
	require.Len(t, f, 2, "git log printed %q", out)
	version := "v0.0.0-" + f[0] + "-" + f[1][:12]

	var archive bytes.Buffer
	cmd := exec.Command("git", "archive", "--format=zip", "HEAD")
	cmd.Dir = root
	cmd.Stdout = &archive
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Run(), "git archive: %s", stderr.String())
	src, err := zip.NewReader(bytes.NewReader(archive.Bytes()), int64(archive.Len()))
	require.NoError(t, err)

	// Directories holding a go.mod of their own are other modules: a
	// module zip leaves them out, as the go command does.
	nested := map[string]bool{}
	for _, zf := range src.File {
		if dir, name := filepath.Split(zf.Name); name == "go.mod" && dir != "" {
			nested[dir] = true
		}
	}
	dir := filepath.Join(proxy, modulePath, "@v")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	var mod bytes.Buffer
	zw := zip.NewWriter(&mod)
	files := 0
	for _, zf := range src.File {
		if zf.FileInfo().IsDir() || !zf.Mode().IsRegular() || inNested(zf.Name, nested) {
			continue
		}
		r, err := zf.Open()
		require.NoError(t, err)
		w, err := zw.Create(modulePath + "@" + version + "/" + zf.Name)
		require.NoError(t, err)
		_, err = io.Copy(w, r)
		require.NoError(t, err)
		require.NoError(t, r.Close())
		files++
		if zf.Name == "go.mod" {
			r, err := zf.Open()
			require.NoError(t, err)
			b, err := io.ReadAll(r)
			require.NoError(t, err)
			require.NoError(t, r.Close())
			require.NoError(t, os.WriteFile(filepath.Join(dir, version+".mod"), b, 0o644))
		}
	}
	require.NoError(t, zw.Close())
	require.FileExists(t, filepath.Join(dir, version+".mod"), "the archive has no go.mod at its root")
	require.NoError(t, os.WriteFile(filepath.Join(dir, version+".zip"), mod.Bytes(), 0o644))
	info := fmt.Sprintf(`{"Version":%q,"Time":%q}`, version, time.Now().UTC().Format(time.RFC3339))
	require.NoError(t, os.WriteFile(filepath.Join(dir, version+".info"), []byte(info), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "list"), []byte(version+"\n"), 0o644))
	t.Logf("module zip: %d files, %d bytes (left out: %d nested modules)", files, mod.Len(), len(nested))
	return version
}

func inNested(name string, nested map[string]bool) bool {
	for dir := range nested {
		if strings.HasPrefix(name, dir) {
			return true
		}
	}
	return false
}

// libraryExample returns the Go block of the README's section "The library
// API in ten lines".
func libraryExample(readme string) (string, error) {
	_, after, ok := strings.Cut(readme, "## The library API in ten lines")
	if !ok {
		return "", fmt.Errorf("README: no section \"The library API in ten lines\"")
	}
	_, after, ok = strings.Cut(after, "```go\n")
	if !ok {
		return "", fmt.Errorf("README: the library section has no go block")
	}
	block, _, ok := strings.Cut(after, "```")
	if !ok {
		return "", fmt.Errorf("README: the library section's go block is not closed")
	}
	return block, nil
}

// goModLine matches the go.mod directives the README's "Depending on it"
// tells a consumer to add, written in backquotes.
var goModLine = regexp.MustCompile("`((?:replace|require) [^`]+)`")

// consumerGoModLines returns the go.mod lines the README's "Depending on
// it" paragraph asks a consumer to add (none: the module builds as
// published).
func consumerGoModLines(readme string) ([]string, error) {
	_, after, ok := strings.Cut(readme, "**Depending on it.**")
	if !ok {
		return nil, fmt.Errorf("README: no \"Depending on it\" paragraph")
	}
	para, _, _ := strings.Cut(after, "\n\n")
	var lines []string
	for _, m := range goModLine.FindAllStringSubmatch(strings.ReplaceAll(para, "\n", " "), -1) {
		lines = append(lines, strings.Join(strings.Fields(m[1]), " "))
	}
	return lines, nil
}

// newConsumer writes a consumer module into dir: go.mod with extra lines,
// and main.go running the README's example on a cql.Store of the cluster
// named by its arguments (hosts, keyspace), also using storage/boltdb,
// metrics and idservice.
func newConsumer(t *testing.T, dir, example string, extra []string) string {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	gomod := "module example.com/consumer\n\ngo 1.26\n"
	for _, l := range extra {
		gomod += "\n" + l + "\n"
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644))

	// The README's first line makes the in-memory store; the consumer
	// opens the cluster's instead, as its comment says a user would.
	first, rest, ok := strings.Cut(example, "\n")
	require.True(t, ok && strings.Contains(first, "mem.New("), "the README's example starts with the in-memory store: %q", first)
	body := `	st, err := cql.Open(ctx, cql.Options{Hosts: strings.Split(os.Args[1], ","), Keyspace: os.Args[2], DisableInitialHostLookup: !strings.Contains(os.Args[1], ",")})
	if err != nil {
		panic(err)
	}
` + indent(rest)
	main := `package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/idservice"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/metrics"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage/boltdb"
	"github.com/cqlseq/cqlseq/storage/cql"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := metrics.New(prometheus.NewRegistry()); err != nil {
		panic(err)
	}
	var _ idservice.Options
	bolt, err := boltdb.Open(filepath.Join(os.TempDir(), fmt.Sprintf("consumer-%d.db", os.Getpid())), boltdb.Options{})
	if err != nil {
		panic(err)
	}
	_ = bolt.Close()
	_ = os.Remove(filepath.Join(os.TempDir(), fmt.Sprintf("consumer-%d.db", os.Getpid())))
` + body + `	if err != nil {
		panic(err)
	}
	fmt.Printf("offset %d numbers %v\n", res.Offset, res.Numbers)
}
`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(main), 0o644))
	return dir
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("\t" + l + "\n")
	}
	return b.String()
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// run runs name args in dir with env (nil: the test's) and returns its
// combined output.
func run(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
