package timeshard_test

import (
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/cqlseq/cqlseq/timeshard"
)

// TestPersistedLayoutGolden pins the node rows' partition key and the ID
// layout of the default split.
func TestPersistedLayoutGolden(t *testing.T) {
	assert.Equal(t, "0000001100000005696473", hex.EncodeToString(timeshard.NodePKey("ids", 5)))
	l := timeshard.DefaultLayout()
	assert.Equal(t, int64(1<<22|2<<12|3), l.Compose(1, 2, 3))
	assert.Equal(t, "2025-01-01T00:00:00Z", l.Epoch.Format("2006-01-02T15:04:05Z07:00"))
}
