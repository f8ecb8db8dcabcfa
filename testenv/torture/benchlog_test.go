package torture

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const benchLog = `time=2026-11-26T13:29:56.800Z level=INFO msg="apppart: took over partition" app=1 partition=0 epoch=4 stored_next_plog_offset=1 blocks_fenced=0
time=2026-11-26T13:29:56.801Z level=INFO msg="apppart: took over partition" app=1 partition=1 epoch=7 stored_next_plog_offset=12 blocks_fenced=1
time=2026-11-26T13:29:56.850Z level=WARN msg="cql: conditional write outcome unknown after serial re-read" op="apply batch if" err="gocql: no response"
time=2026-11-26T13:29:56.860Z level=INFO msg="cql: conditional write outcome decided by serial re-read: applied" op="compare and swap" err="gocql: no response"
time=2026-11-26T13:29:56.870Z level=WARN msg="cql: conditional write outcome unknown (a serial re-read could not prove it applied)" op="compare and delete"
time=2026-11-26T13:29:56.888Z level=ERROR msg="apppart: group write refused, partition stopped"
`

func TestScanBenchLog(t *testing.T) {
	b, err := ScanBenchLog(strings.NewReader(benchLog))
	require.NoError(t, err)
	assert.Equal(t, 2, b.Unknown)
	assert.Equal(t, 1, b.Decided)
	assert.Equal(t, 3, b.UnknownOutcomes())
	assert.Equal(t, []TakeoverLog{{0, 4}, {1, 7}}, b.Takeovers)
}

func TestScanBenchLogRejectsATakeoverWithoutEpoch(t *testing.T) {
	_, err := ScanBenchLog(strings.NewReader(`level=INFO msg="apppart: took over partition" app=1 partition=0` + "\n"))
	require.ErrorContains(t, err, "without partition and epoch")
}

func TestSharedEpochs(t *testing.T) {
	a := []TakeoverLog{{0, 4}, {1, 7}, {0, 6}}
	b := []TakeoverLog{{0, 5}, {1, 7}, {0, 6}, {1, 7}}
	assert.Equal(t, []TakeoverLog{{0, 6}, {1, 7}}, SharedEpochs(a, b))
	assert.Empty(t, SharedEpochs(a, []TakeoverLog{{0, 5}, {1, 8}}))
	assert.Equal(t, 2, ContestedPartitions(a, b))
	assert.Equal(t, 1, ContestedPartitions(a, []TakeoverLog{{1, 9}}))
}
