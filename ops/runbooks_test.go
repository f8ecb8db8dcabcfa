package ops

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	runbooksFile = "../docs/runbooks.md"
	// runbookPrefix is how a rule's runbook_url names docs/runbooks.md
	// (relative to the repository's root).
	runbookPrefix = "docs/runbooks.md#"
)

// alertAnnotations returns every alert of the rules file with its
// annotations, in the file's order.
func alertAnnotations(t *testing.T) ([]string, map[string]map[string]string) {
	t.Helper()
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert       string
				Annotations map[string]string
			}
		}
	}
	readYAML(t, rulesFile, &rules)
	var names []string
	annots := map[string]map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue // a recording rule
			}
			if _, dup := annots[r.Alert]; dup {
				t.Errorf("%s: alert %s defined twice", rulesFile, r.Alert)
			}
			names = append(names, r.Alert)
			annots[r.Alert] = r.Annotations
		}
	}
	if len(names) == 0 {
		t.Fatalf("%s: no alert found", rulesFile)
	}
	return names, annots
}

// runbookHeadings returns the "## " headings of docs/runbooks.md.
func runbookHeadings(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(runbooksFile)
	if err != nil {
		t.Fatal(err)
	}
	var hs []string
	for _, m := range regexp.MustCompile(`(?m)^## (.*?)\s*$`).FindAllStringSubmatch(string(b), -1) {
		hs = append(hs, m[1])
	}
	return hs
}

// TestRunbooks checks that every alert links its runbook
// (runbook_url: docs/runbooks.md#<lowercased name>), that docs/runbooks.md
// has a "## <Name>" section for each (GitHub's anchor of such a heading is
// the lowercased name, hence the plain-name check), that every "## Cqlseq..."
// section there is an alert (no stale runbook), and that ops/README.md's
// alert table links each alert to its runbook.
func TestRunbooks(t *testing.T) {
	names, annots := alertAnnotations(t)
	headings := runbookHeadings(t)
	plain := regexp.MustCompile(`^[A-Za-z0-9]+$`)

	for _, name := range names {
		if !plain.MatchString(name) {
			t.Errorf("alert %q: its runbook anchor is not the lowercased name (use letters and digits only)", name)
		}
		want := runbookPrefix + strings.ToLower(name)
		switch got, ok := annots[name]["runbook_url"]; {
		case !ok:
			t.Errorf("%s: alert %s has no runbook_url annotation (want %q)", rulesFile, name, want)
		case got != want:
			t.Errorf("%s: alert %s: runbook_url %q, want %q", rulesFile, name, got, want)
		}
		if !slices.Contains(headings, name) {
			t.Errorf("%s: no section \"## %s\" for alert %s", runbooksFile, name, name)
		}
	}

	for _, h := range headings {
		if strings.HasPrefix(h, "Cqlseq") && annots[h] == nil {
			t.Errorf("%s: section \"## %s\" names no alert of %s (a stale or misspelt runbook)", runbooksFile, h, rulesFile)
		}
	}
	seen := map[string]bool{}
	for _, h := range headings {
		if seen[h] {
			t.Errorf("%s: section \"## %s\" appears twice", runbooksFile, h)
		}
		seen[h] = true
	}

	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		link := "[" + name + "](../" + runbookPrefix + strings.ToLower(name) + ")"
		if !strings.Contains(string(readme), "| "+link) {
			t.Errorf("ops/README.md: the alert table does not start a row with %s", link)
		}
	}
}

// TestRunbookMetricNames checks every cqlseq_ name docs/runbooks.md gives
// against what the metrics package and the ID service export, as
// TestMetricNames does for the ops files.
func TestRunbookMetricNames(t *testing.T) {
	cat := exported(t)
	b, err := os.ReadFile(runbooksFile)
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`\bcqlseq_[a-z0-9_]*[a-z0-9]`).FindAllString(string(b), -1)
	if len(names) == 0 {
		t.Fatalf("%s names no metric", runbooksFile)
	}
	for _, n := range names {
		if _, ok := cat.series[n]; !ok && !cat.families[n] {
			t.Errorf("%s: names %q, which neither the metrics package nor the ID service exports", runbooksFile, n)
		}
	}
}
