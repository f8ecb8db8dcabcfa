package shellwords

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLineQuotesWhatTheShellWouldInterpret(t *testing.T) {
	assert.Equal(t, `go test -run '^$' -bench 'A/b=1$|C' ./x/`, Line("go", "test", "-run", "^$", "-bench", "A/b=1$|C", "./x/"))
	assert.Equal(t, `x --r "{'a': 1}"`, Line("x", "--r", "{'a': 1}"))
	assert.Equal(t, `x '$'\''a' ''`, Line("x", "$'a", ""))
	assert.Equal(t, `cqlseq plot --region '5:8:node 3 cut'`, Line("cqlseq", "plot", "--region", "5:8:node 3 cut"))
}
