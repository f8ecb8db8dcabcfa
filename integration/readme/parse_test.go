package readme

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sample = "# x\n\n## Quick start\n\n```sh\nmake demo   # the demo\n#> 5. verify … OK\nmake test\n```\n\n" +
	"## Library\n\n```sh\nnot run\n```\n\n## Ops\n\n- metrics:\n\n  ```sh\n  a --x \\\n    --y &\n  # a comment\n  b | grep z\n  #> z\n  ```\n\n```go\nnot run either\n```\n"

func TestParseCommandsTakesTheNamedSectionsBlocks(t *testing.T) {
	cmds, err := parseCommands(sample, []string{"Quick start", "Ops"})
	require.NoError(t, err)
	require.Len(t, cmds, 4)
	assert.Equal(t, "make demo   # the demo", cmds[0].text)
	assert.Equal(t, 6, cmds[0].line)
	require.Len(t, cmds[0].expect, 1)
	assert.Equal(t, []string{"5. verify", "OK"}, cmds[0].expect[0].fragments)
	assert.Equal(t, "make test", bareCommand(cmds[1].text))
	assert.Equal(t, "a --x \\\n--y &", cmds[2].text)
	assert.Equal(t, "Ops", cmds[2].section)
	assert.Equal(t, "b | grep z", cmds[3].text)
	assert.Equal(t, []string{"z"}, cmds[3].expect[0].fragments)
	assert.Equal(t, "make demo", bareCommand(cmds[0].text))

	_, err = parseCommands(sample, []string{"Quick start", "Operations"})
	assert.ErrorContains(t, err, `no section "Operations"`)
	_, err = parseCommands("## A\n\n```sh\n#> x\n```\n", []string{"A"})
	assert.ErrorContains(t, err, "follows no command")
	_, err = parseCommands("## A\n\n```sh\na \\\n```\n", []string{"A"})
	assert.ErrorContains(t, err, "inside a continued command")
}

func TestParseCommandsKeepsHereDocuments(t *testing.T) {
	const doc = "## S\n\n- py:\n\n  ```sh\n  python3 - $A <<'EOF'   # pip install requests\n  import sys\n  # a comment of the script\n  if sys.argv:\n      print(1)\n  EOF\n  #> 1\n  cat \\\n    <<END\n  x\n  END\n  echo <<< x\n  ```\n"
	cmds, err := parseCommands(doc, []string{"S"})
	require.NoError(t, err)
	require.Len(t, cmds, 3)
	assert.Equal(t, "python3 - $A <<'EOF'   # pip install requests\nimport sys\n# a comment of the script\nif sys.argv:\n    print(1)\nEOF", cmds[0].text)
	require.Len(t, cmds[0].expect, 1)
	assert.Equal(t, []string{"1"}, cmds[0].expect[0].fragments)
	assert.Equal(t, "cat \\\n<<END\nx\nEND", cmds[1].text)
	assert.Equal(t, "echo <<< x", cmds[2].text)
	assert.Equal(t, 6, cmds[0].line)

	_, err = parseCommands("## S\n\n```sh\ncat <<\"EOF\"\nx\n```\n", []string{"S"})
	assert.ErrorContains(t, err, "inside a here-document (no EOF line)")
}

func TestExpectationFragmentsMatchInOrder(t *testing.T) {
	e := expectation{fragments: []string{"acks", "OK, 0 lost", "0 duplicates"}}
	assert.True(t, e.matches("acks a.log: 5 commands: OK, 0 lost, 0 duplicates, 0 regressions"))
	assert.False(t, e.matches("acks a.log: 5 commands: OK, 0 lost, 3 duplicates"))
	assert.False(t, e.matches("0 duplicates; acks: OK, 0 lost"), "out of order")
}
