package cassandra

import (
	"net"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestProbeUnreachableLeaksNothing: Restart and Start probe a starting node
// many times; a failed probe must not leave the driver's goroutines behind.
func TestProbeUnreachableLeaksNothing(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ports, err := freePorts(1)
	require.NoError(t, err)
	_, err = probe(net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])))
	require.Error(t, err)
}
