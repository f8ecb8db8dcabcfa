package voedger

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/plog/voedger/voedgertest"
	"github.com/cqlseq/cqlseq/storage/cql"
)

type actualized struct {
	Partitions []struct {
		Partition      uint16 `json:"partition"`
		NextPLogOffset uint64 `json:"next_plog_offset"`
		Events         uint64 `json:"events"`
		Numbers        []struct {
			WSID  uint64 `json:"wsid"`
			SeqID uint16 `json:"seq_id"`
			Last  uint64 `json:"last"`
			Next  uint64 `json:"next"`
		} `json:"numbers"`
	} `json:"partitions"`
}

// TestCLIActualizeCQL: cqlseq actualize and verify --plog-format voedger
// on the golden PLog in one keyspace, the sequence rows in another.
func TestCLIActualizeCQL(t *testing.T) {
	g, err := voedgertest.Load()
	require.NoError(t, err)
	appKS, vvmKS := itest.NewKeyspace(t), itest.NewKeyspace(t)
	st := itest.OpenStore(t, func(o *cql.Options) { o.Keyspace = appKS })
	require.NoError(t, g.PutPLog(context.Background(), st))
	hosts := strings.Join(itest.Hosts(), ",")
	args := []string{"actualize", "--plog-format", "voedger", "--store", "cql", "--hosts", hosts, "--keyspace", appKS, "--seq-keyspace", vvmKS, "--app", "3", "--partition", "1,2"}

	jf := filepath.Join(t.TempDir(), "a.json")
	res := itest.RunCLI(t, append(args, "--json", jf, "--write")...)
	require.Equal(t, 0, res.Code, res.Output())
	b, err := os.ReadFile(jf)
	require.NoError(t, err)
	var a actualized
	require.NoError(t, json.Unmarshal(b, &a))
	require.Len(t, a.Partitions, 2)
	var events uint64
	for _, p := range a.Partitions {
		events += p.Events
		for _, n := range p.Numbers {
			assert.Equal(t, g.WantNext(n.WSID, seqID(n.SeqID), n.Last+1), n.Next, "WSID %d SeqID %d", n.WSID, n.SeqID)
		}
	}
	assert.Equal(t, uint64(len(g.Events)), events)

	// The rows written are the golden phase-A rows, corrected.
	vvm := itest.OpenStore(t, func(o *cql.Options) { o.Keyspace = vvmKS })
	for _, r := range g.ExpectedRows() {
		p, c, v := r.Bytes()
		got, ok, err := vvm.Get(context.Background(), p, c)
		require.NoError(t, err)
		require.True(t, ok, "row %s/%s", r.PKey, r.CCols)
		assert.Equal(t, v, got, "row %s/%s (%s)", r.PKey, r.CCols, r.Meaning)
	}

	res = itest.RunCLI(t, args...)
	require.Equal(t, 0, res.Code, res.Output())
	assert.Contains(t, res.Output(), "partition 1: stored next offset 18, 0 events read")

	res = itest.RunCLI(t, "verify", "--plog-format", "voedger", "--store", "cql", "--hosts", hosts, "--keyspace", appKS, "--partition", "1,2")
	require.Equal(t, 0, res.Code, res.Output())
	assert.Equal(t, 2, strings.Count(res.Output(), ": OK"), res.Output())
}
