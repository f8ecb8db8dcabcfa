package cli

import (
	"log/slog"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCQLLocalDCFlag(t *testing.T) {
	var c clusterFlags
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	c.add(fs)
	require.NoError(t, fs.Parse([]string{"--hosts", "h1,h2", "--cql-local-dc", "dc1"}))
	require.Empty(t, c.validate())
	o, err := c.cqlOptions(slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	assert.Equal(t, "dc1", o.LocalDC)

	c = clusterFlags{}
	fs = pflag.NewFlagSet("t", pflag.ContinueOnError)
	c.add(fs)
	require.NoError(t, fs.Parse(nil))
	o, err = c.cqlOptions(slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	assert.Empty(t, o.LocalDC, "default: no local data centre")
}
