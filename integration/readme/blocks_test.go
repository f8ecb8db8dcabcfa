package readme

import (
	"bufio"
	"fmt"
	"regexp"
	"strings"
)

// command is one command of a README block, as a user would type it.
type command struct {
	section string
	line    int    // the README line it starts on
	text    string // continuation lines joined with a newline
	expect  []expectation
}

// expectation is one "#>" line: fragments the command's output shows in
// this order ("…" between them stands for anything).
type expectation struct {
	line      int
	fragments []string
}

func (e expectation) String() string { return strings.Join(e.fragments, " … ") }

// matches reports whether out shows e's fragments in order.
func (e expectation) matches(out string) bool {
	for _, f := range e.fragments {
		i := strings.Index(out, f)
		if i < 0 {
			return false
		}
		out = out[i+len(f):]
	}
	return true
}

// parseCommands returns the commands of the ```sh blocks in the README's
// sections named in sections ("## Name"), in README order. In a block:
// a "#>" line is an expectation of the command above it, another "#"
// line a comment, a line ending in "\" continues on the next. Blocks may
// be indented (inside a list item). A here-document (<<EOF, <<'EOF') belongs
// to its command: its lines are taken as written (without the block's
// indentation), "#" lines included, up to its delimiter line.
func parseCommands(readme string, sections []string) ([]command, error) {
	want := map[string]bool{}
	for _, s := range sections {
		want[s] = true
	}
	var (
		cmds    []command
		section string
		inBlock bool
		run     bool   // the open block is in a wanted section
		cont    bool   // the last command ends in a backslash
		indent  string // the open block's indentation
		heredoc string // the delimiter of the here-document being read
		pending string // a here-document's delimiter, its command continued
		seen    = map[string]bool{}
	)
	sc := bufio.NewScanner(strings.NewReader(readme))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case !inBlock && strings.HasPrefix(line, "## "):
			section = strings.TrimSpace(strings.TrimPrefix(line, "## "))
			seen[section] = true
			continue
		case !inBlock && strings.HasPrefix(trimmed, "```"):
			inBlock = true
			run = want[section] && trimmed == "```sh"
			indent = line[:len(line)-len(strings.TrimLeft(line, " \t"))]
			continue
		case inBlock && heredoc != "" && run:
			if trimmed == "```" {
				return nil, fmt.Errorf("README line %d: the block ends inside a here-document (no %s line)", n, heredoc)
			}
			c := &cmds[len(cmds)-1]
			body := strings.TrimPrefix(line, indent)
			c.text += "\n" + body
			if body == heredoc {
				heredoc = ""
			}
			continue
		case inBlock && trimmed == "```":
			if cont {
				return nil, fmt.Errorf("README line %d: the block ends inside a continued command", n)
			}
			inBlock, run = false, false
			continue
		case !inBlock || !run:
			continue
		}
		switch {
		case cont:
			c := &cmds[len(cmds)-1]
			c.text += "\n" + trimmed
			cont = strings.HasSuffix(trimmed, `\`)
			heredoc, pending = opens(trimmed, cont, pending)
		case trimmed == "":
		case strings.HasPrefix(trimmed, "#>"):
			if len(cmds) == 0 || cmds[len(cmds)-1].section != section {
				return nil, fmt.Errorf("README line %d: %q follows no command of its section", n, trimmed)
			}
			var e expectation
			e.line = n
			for _, f := range strings.Split(strings.TrimPrefix(trimmed, "#>"), "…") {
				if f = strings.TrimSpace(f); f != "" {
					e.fragments = append(e.fragments, f)
				}
			}
			if len(e.fragments) == 0 {
				return nil, fmt.Errorf("README line %d: an empty #> line", n)
			}
			c := &cmds[len(cmds)-1]
			c.expect = append(c.expect, e)
		case strings.HasPrefix(trimmed, "#"):
		default:
			cmds = append(cmds, command{section: section, line: n, text: trimmed})
			cont = strings.HasSuffix(trimmed, `\`)
			heredoc, pending = opens(trimmed, cont, "")
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if inBlock {
		return nil, fmt.Errorf("README: a code block is not closed")
	}
	for _, s := range sections {
		if !seen[s] {
			return nil, fmt.Errorf("README: no section %q", s)
		}
	}
	return cmds, nil
}

// heredocRE is a here-document's redirection: <<WORD, <<'WORD', <<"WORD"
// (<<- and <<< are not supported: a here-string needs no lines).
var heredocRE = regexp.MustCompile(`(^|[^<])<<\s*(?:'([A-Za-z_][A-Za-z0-9_]*)'|"([A-Za-z_][A-Za-z0-9_]*)"|([A-Za-z_][A-Za-z0-9_]*))`)

// heredocDelimiter returns the delimiter of the here-document a command
// line opens, or "".
func heredocDelimiter(line string) string {
	m := heredocRE.FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	return m[2] + m[3] + m[4]
}

// opens returns the delimiter of the here-document whose lines follow a
// command's line (its last line: cont false), and the one a continued
// command has opened so far.
func opens(line string, cont bool, pending string) (heredoc, stillPending string) {
	if pending == "" {
		pending = heredocDelimiter(line)
	}
	if cont {
		return "", pending
	}
	return pending, ""
}

// script is the bash script that runs cmds in one shell, as typed one after
// the other: command i's output (stdout and stderr) goes to dir/i.out and
// its exit status to dir/i.rc; the script stops after the first failure.
func script(cmds []command, dir string) string {
	var b strings.Builder
	for i, c := range cmds {
		fmt.Fprintf(&b, "# README line %d\n{ %s\n} >%q 2>&1 </dev/null\nrc=$?; echo $rc >%q\n[ $rc -eq 0 ] || exit 0\n",
			c.line, c.text, fmt.Sprintf("%s/%d.out", dir, i), fmt.Sprintf("%s/%d.rc", dir, i))
	}
	return b.String()
}
