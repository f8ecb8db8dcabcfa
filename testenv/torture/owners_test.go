package torture

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/plog/plogcheck"
)

// The issue 20 item 8 round: A, paused between a durable group and its
// ack-log write, logs acks of offsets 1407 (partition 0) and 1408
// (partition 1) after it resumes; B began at 1408 and 1409. Fencing held.
func TestTakeoverAcceptsLateLinesBelowBsFirstOffset(t *testing.T) {
	in := Takeover{
		AAcks: []AckOffset{{0, 1400}, {1, 1401}, {0, 1406}, {1, 1408}, {0, 1407}},
		BAcks: []AckOffset{{0, 1409}, {1, 1409}, {0, 1408}, {1, 1410}},
		Events: []OwnedEvent{
			{0, 1406, OwnerA}, {0, 1407, OwnerA}, {0, 1408, OwnerB}, {0, 1409, OwnerB},
			{1, 1408, OwnerA}, {1, 1409, OwnerB}, {1, 1410, OwnerB},
			{0, 1, OwnerOther}, {1, 5000, OwnerOther},
		},
	}
	r := CheckTakeover(in)
	require.Empty(t, r.Violations)
	require.Empty(t, r.Unjudged)
	require.Equal(t, []TakeoverPartition{
		{Partition: 0, BFirst: 1408, AHighestAck: 1407, AHighestEvent: 1407},
		{Partition: 1, BFirst: 1409, AHighestAck: 1408, AHighestEvent: 1408},
	}, r.Partitions)
	assert.Contains(t, r.Summary(), "p0: A's highest ack 1407, highest event 1407, B's first 1408")
}

// Fencing disabled: A resumes and overwrites B's first events (trust2 puts)
// and acknowledges them; B's acks still name its first offset.
func TestTakeoverFindsAOverwritingB(t *testing.T) {
	in := Takeover{
		AAcks:  []AckOffset{{0, 99}, {0, 100}, {0, 101}},
		BAcks:  []AckOffset{{0, 100}, {0, 101}, {0, 102}},
		Events: []OwnedEvent{{0, 99, OwnerA}, {0, 100, OwnerA}, {0, 101, OwnerA}, {0, 102, OwnerB}},
	}
	r := CheckTakeover(in)
	require.Equal(t, []string{
		"partition 0 offset 100: an event of A is durable at or above B's first offset 100",
		"partition 0 offset 101: an event of A is durable at or above B's first offset 100",
		"partition 0 offset 100: A acknowledged a command at or above B's first offset 100",
		"partition 0 offset 101: A acknowledged a command at or above B's first offset 100",
	}, r.Violations)
}

// An event of A above B's first offset that A never acknowledged is still
// a violation; so is an ack of A above it whose event B replaced.
func TestTakeoverJudgesEventsAndAcksApart(t *testing.T) {
	r := CheckTakeover(Takeover{
		BAcks:  []AckOffset{{2, 10}},
		Events: []OwnedEvent{{2, 10, OwnerB}, {2, 11, OwnerA}},
	})
	require.Equal(t, []string{"partition 2 offset 11: an event of A is durable at or above B's first offset 10"}, r.Violations)

	r = CheckTakeover(Takeover{
		AAcks:  []AckOffset{{2, 12}},
		Events: []OwnedEvent{{2, 10, OwnerB}, {2, 12, OwnerB}},
	})
	require.Equal(t, []string{"partition 2 offset 12: A acknowledged a command at or above B's first offset 10"}, r.Violations)
}

func TestTakeoverWithoutBInAPartitionIsUnjudged(t *testing.T) {
	r := CheckTakeover(Takeover{
		AAcks:  []AckOffset{{3, 50}},
		BAcks:  []AckOffset{{0, 7}},
		Events: []OwnedEvent{{3, 50, OwnerA}, {0, 7, OwnerB}},
	})
	require.Empty(t, r.Violations)
	require.Equal(t, []uint16{3}, r.Unjudged)
}

func TestAckOffsets(t *testing.T) {
	log, err := plogcheck.ParseAckLog("a.log", []byte("# run\n0 1407 3 1:5,2:5\n\n1 1408 4 1:9\n1 14"))
	require.NoError(t, err)
	require.Equal(t, []AckOffset{{0, 1407}, {1, 1408}}, AckOffsets(log.Acks))
	require.Empty(t, AckOffsets(nil))
}

func TestParseVerdict(t *testing.T) {
	ok := `{"store": "cql", "app": 1, "ok": true, "partitions": [{"partition": 0, "problems": 0}, {"partition": 1, "problems": 0}],
	  "acks": {"acks": 1234, "torn_bytes": 0, "partitions": 2, "problems": 0}}`
	v, err := ParseVerdict([]byte(ok))
	require.NoError(t, err)
	require.Equal(t, Verdict{OK: true, Acks: 1234}, v)

	bad := `{"ok": false, "partitions": [{"problems": 2, "by_kind": {"duplicate": 1, "backwards": 1}}],
	  "acks": {"acks": 10, "problems": 6, "by_kind": {"lost": 2, "duplicate": 1, "regression": 3}}}`
	v, err = ParseVerdict([]byte(bad))
	require.NoError(t, err)
	require.Equal(t, Verdict{OK: false, Lost: 2, Duplicates: 3, Regressions: 3, Problems: 8, Acks: 10}, v)

	// A finding of a kind the campaign does not name fails it too.
	v, err = ParseVerdict([]byte(`{"ok": true, "partitions": [{"problems": 1, "by_kind": {"offset": 1}}]}`))
	require.NoError(t, err)
	require.False(t, v.OK)

	_, err = ParseVerdict([]byte(`{"ok": tru`))
	require.Error(t, err)
}
