package schema

import (
	"fmt"
	"strings"
)

// Why a lexer of our own: the migrator must split a script into statements
// and put Options.Keyspace in place of the word cqlseq, outside strings and
// comments, keeping every other byte (the checksum is of the script as
// written). gocql runs one statement per query and has no script runner;
// golang-migrate's Cassandra driver applies a file as one statement unless
// x-multi-statement, which splits at every ';' byte ("cannot be used when a
// statement in the migration contains a string with a semi-colon", its
// README), and substitutes nothing. The cases it must get right (a ';' or
// the keyspace word inside a string, a quoted identifier, a $$ string, a
// comment, an unterminated string) are pinned in schema_test.go
// (TestLexRoundTrip, TestLexErrors, TestSubstitution).

// tokenKind classifies a lexeme of a CQL script.
type tokenKind int

const (
	tokSpace   tokenKind = iota // blanks and newlines
	tokComment                  // -- or // to end of line, or /* ... */
	tokWord                     // unquoted identifier or keyword
	tokQuoted                   // "quoted identifier"
	tokString                   // 'string' or $$string$$
	tokNumber                   // integer or decimal literal
	tokPunct                    // one punctuation character
)

// token is one lexeme; text is exactly the source text, so concatenating the
// tokens of a script gives the script back.
type token struct {
	kind tokenKind
	text string
}

// lex splits CQL source into tokens. It fails on an unterminated string,
// quoted identifier or block comment.
func lex(src string) ([]token, error) {
	var out []token
	line := 1
	for i := 0; i < len(src); {
		start := i
		c := src[i]
		var kind tokenKind
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			for i < len(src) && strings.IndexByte(" \t\r\n", src[i]) >= 0 {
				i++
			}
			kind = tokSpace
		case strings.HasPrefix(src[i:], "--") || strings.HasPrefix(src[i:], "//"):
			if j := strings.IndexByte(src[i:], '\n'); j >= 0 {
				i += j
			} else {
				i = len(src)
			}
			kind = tokComment
		case strings.HasPrefix(src[i:], "/*"):
			j := strings.Index(src[i+2:], "*/")
			if j < 0 {
				return nil, fmt.Errorf("line %d: unterminated block comment", line)
			}
			i += 2 + j + 2
			kind = tokComment
		case c == '\'' || c == '"':
			// A doubled quote inside is an escaped quote.
			i++
			for {
				j := strings.IndexByte(src[i:], c)
				if j < 0 {
					return nil, fmt.Errorf("line %d: unterminated %c", line, c)
				}
				i += j + 1
				if i < len(src) && src[i] == c {
					i++
					continue
				}
				break
			}
			kind = tokString
			if c == '"' {
				kind = tokQuoted
			}
		case strings.HasPrefix(src[i:], "$$"):
			j := strings.Index(src[i+2:], "$$")
			if j < 0 {
				return nil, fmt.Errorf("line %d: unterminated $$ string", line)
			}
			i += 2 + j + 2
			kind = tokString
		case isLetter(c):
			for i < len(src) && (isLetter(src[i]) || isDigit(src[i]) || src[i] == '_') {
				i++
			}
			kind = tokWord
		case isDigit(c) || c == '-' && i+1 < len(src) && isDigit(src[i+1]):
			i++
			for i < len(src) && (isDigit(src[i]) || src[i] == '.') {
				i++
			}
			kind = tokNumber
		default:
			i++
			kind = tokPunct
		}
		out = append(out, token{kind: kind, text: src[start:i]})
		line += strings.Count(src[start:i], "\n")
	}
	return out, nil
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool  { return c >= '0' && c <= '9' }

// significant reports whether a token carries meaning (not space, not comment).
func (t token) significant() bool { return t.kind != tokSpace && t.kind != tokComment }

// is reports whether t is the keyword or punctuation s (keywords compare
// case-insensitively, as CQL does).
func (t token) is(s string) bool {
	switch t.kind {
	case tokWord:
		return strings.EqualFold(t.text, s)
	case tokPunct:
		return t.text == s
	}
	return false
}

// splitStatements splits tokens into statements at top-level semicolons and
// drops statements with no significant token. The semicolon is not kept.
func splitStatements(toks []token) [][]token {
	var out [][]token
	var cur []token
	flush := func() {
		for _, t := range cur {
			if t.significant() {
				out = append(out, cur)
				break
			}
		}
		cur = nil
	}
	for _, t := range toks {
		if t.is(";") {
			flush()
			continue
		}
		cur = append(cur, t)
	}
	flush()
	return out
}

// render joins a statement's tokens, dropping comments and collapsing
// blanks, so that the text sent to the server is one clean line.
func render(stmt []token) string {
	var b strings.Builder
	space := false
	for _, t := range stmt {
		if !t.significant() {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteString(t.text)
	}
	return b.String()
}

// words returns the first n significant tokens' texts (fewer when the
// statement is shorter).
func words(stmt []token, n int) []token {
	var out []token
	for _, t := range stmt {
		if len(out) == n {
			break
		}
		if t.significant() {
			out = append(out, t)
		}
	}
	return out
}
