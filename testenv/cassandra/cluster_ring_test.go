package cassandra

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gocql/gocql"
	"github.com/stretchr/testify/assert"
)

// TestRingErrorTellsANodeHoldingPeersDown: only a node that refuses a read
// at ALL as unavailable (its failure detector holds peers down) is one
// that waitWhole may restart; a node that does not answer, or that sees a
// peer not NORMAL in gossip, is not.
func TestRingErrorTellsANodeHoldingPeersDown(t *testing.T) {
	unavailable := &gocql.RequestErrUnavailable{Consistency: gocql.All, Required: 3, Alive: 1}
	stuck := &RingError{Node: 3, Host: "127.0.0.3:9042", Err: fmt.Errorf("%w: %w", errReadAtAll, unavailable)}
	assert.True(t, stuck.HoldsPeersDown())
	assert.Equal(t, "node 3 (127.0.0.3:9042): a read at consistency ALL: "+unavailable.Error(), stuck.Error())
	var re *RingError
	assert.True(t, errors.As(fmt.Errorf("cassandra: the ring is not all up and normal within 1m0s: %w", stuck), &re))
	assert.Equal(t, 3, re.Node)

	assert.False(t, (&RingError{Node: 2, Err: errors.New("2 of 3 nodes NORMAL in gossip")}).HoldsPeersDown())
	assert.False(t, (&RingError{Node: 2, Err: fmt.Errorf("%w: %w", errReadAtAll, gocql.ErrTimeoutNoResponse)}).HoldsPeersDown())
	assert.False(t, (&RingError{Node: 2, Err: unavailable}).HoldsPeersDown(), "not the read at ALL")
}

// TestAllReadTableFitsTheClusterSize: a read at ALL waits for the
// keyspace's replication factor of live replicas (system_distributed 3,
// system_traces 2), so a smaller cluster would never pass WaitRing.
func TestAllReadTableFitsTheClusterSize(t *testing.T) {
	assert.Equal(t, "", allReadTable(1))
	assert.Equal(t, "system_traces.sessions", allReadTable(2))
	assert.Equal(t, "system_distributed.repair_history", allReadTable(3))
	assert.Equal(t, "system_distributed.repair_history", allReadTable(MaxNodes))
}
