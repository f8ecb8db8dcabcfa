package voedger

import (
	"testing"

	"github.com/cqlseq/cqlseq/integration/itest"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog/voedger/voedgertest"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/cql"
)

// TestGoldenCQL: the PLog rows go to the run's keyspace (writing them
// again is idempotent); each subtest gets a fresh keyspace for the
// sequence rows, which must start empty.
func TestGoldenCQL(t *testing.T) {
	itest.NoLeaks(t)
	voedgertest.Run(t, func(t *testing.T) (storage.Storage, storage.Storage) {
		seqKS := itest.NewKeyspace(t)
		return itest.OpenStore(t), itest.OpenStore(t, func(o *cql.Options) { o.Keyspace = seqKS })
	})
}

func seqID(id uint16) isequencer.SeqID { return isequencer.SeqID(id) }
