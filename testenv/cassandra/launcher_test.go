package cassandra

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOptionsValidate(t *testing.T) {
	var o Options
	o.EnsureDefaults()
	require.NoError(t, o.Validate())

	o = Options{Version: "", Java: "", Heap: "", StartTimeout: -time.Second}
	err := o.Validate()
	require.ErrorIs(t, err, ErrInvalidOptions)
	for _, want := range []string{"Version", "Java", "Heap", "StartTimeout"} {
		require.Contains(t, err.Error(), want)
	}
}

func TestStartClusterRefusesSecure(t *testing.T) {
	_, err := StartCluster(context.Background(), Options{Secure: true, Java: "java"}, 2, nil)
	if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), "Secure is for Start") {
		t.Fatalf("StartCluster with Secure: %v", err)
	}
}
