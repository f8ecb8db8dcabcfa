package cli

import (
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVersionString(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "8f7ba30a1b2c3d4e5f60718293a4b5c6d7e8f901"}, {Key: "vcs.modified", Value: "true"}}}
	require.Equal(t, "cqlseq devel (commit 8f7ba30a1b2c+dirty, go1.26.8)", versionString("", bi, "go1.26.8"))
	require.Equal(t, "cqlseq v0.1.0 (commit 8f7ba30a1b2c+dirty, go1.26.8)", versionString("v0.1.0", bi, "go1.26.8"))
	installed := &debug.BuildInfo{Main: debug.Module{Version: "v0.1.0"}}
	require.Equal(t, "cqlseq v0.1.0 (commit unknown, go1.26.8)", versionString("", installed, "go1.26.8"))
	require.Equal(t, "cqlseq devel (commit unknown, go1.26.8)", versionString("", nil, "go1.26.8"))
}

func TestVersionCommand(t *testing.T) {
	r := runCLI(t, "version")
	require.Equal(t, ExitOK, r.code, r.stderr)
	require.True(t, strings.HasPrefix(r.stdout, "cqlseq "), r.stdout)
	require.Contains(t, r.stdout, "go1.")
	r = runCLI(t, "version", "extra")
	require.Equal(t, ExitUsage, r.code, r.stderr)
}
