package cassandra

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCheckToolsNamesMissingJava(t *testing.T) {
	o := Options{Java: filepath.Join(t.TempDir(), "no-such-java"), CacheDir: t.TempDir()}
	err := CheckTools(o)
	require.Error(t, err)
	require.True(t, errors.Is(err, ErrMissingTool))
	require.Contains(t, err.Error(), "java")
	require.Contains(t, err.Error(), "Java 17")
}

func TestParseJavaMajor(t *testing.T) {
	for _, tt := range []struct {
		out  string
		want int
		werr bool
	}{
		{`openjdk version "17.0.15" 2025-04-15`, 17, false},
		{`java version "1.8.0_402"`, 8, false},
		{`openjdk version "21" 2023-09-19`, 21, false},
		{`garbage`, 0, true},
	} {
		n, err := parseJavaMajor(tt.out)
		if tt.werr {
			require.Error(t, err, tt.out)
			continue
		}
		require.NoError(t, err, tt.out)
		require.Equal(t, tt.want, n, tt.out)
	}
}
