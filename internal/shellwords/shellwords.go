// Package shellwords writes a command line as one would type it in a
// POSIX shell, so that a printed command can be pasted and run.
package shellwords

import "strings"

// Line is name and args joined by spaces, each arg quoted when the shell
// would otherwise interpret it: in double quotes when it holds a single
// quote and nothing double quotes would expand, else in single quotes.
func Line(name string, args ...string) string {
	words := []string{name}
	for _, a := range args {
		words = append(words, Quote(a))
	}
	return strings.Join(words, " ")
}

// Quote is a as one shell word.
func Quote(a string) string {
	switch {
	case a != "" && !strings.ContainsAny(a, " '\"$|^*?&;()<>{}[]\\`!#~"):
		return a
	case strings.Contains(a, "'") && !strings.ContainsAny(a, "\"$\\`!"):
		return `"` + a + `"`
	default:
		return "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
}
