package mem_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/mem"
)

// TestBackupRestore: Restore brings back the rows as Backup took them,
// with their versions, and forgets every row written after.
func TestBackupRestore(t *testing.T) {
	ctx := context.Background()
	s := mem.New(mem.Options{})
	defer s.Close()
	p := []byte("p")
	require.NoError(t, s.PutBatch(ctx, []storage.Row{{PKey: p, CCols: []byte("a"), Value: []byte("a1"), Version: 10}}))
	require.NoError(t, s.Put(ctx, p, []byte("b"), []byte("b1")))
	b, err := s.Backup()
	require.NoError(t, err)

	require.NoError(t, s.PutBatch(ctx, []storage.Row{{PKey: p, CCols: []byte("a"), Value: []byte("a2"), Version: 20}}))
	require.NoError(t, s.Put(ctx, p, []byte("c"), []byte("c1")))
	require.NoError(t, s.Restore(b))

	got := map[string]string{}
	require.NoError(t, s.Read(ctx, p, nil, nil, func(cc, v []byte) error { got[string(cc)] = string(v); return nil }))
	require.Equal(t, map[string]string{"a": "a1", "b": "b1"}, got)

	// The restored row keeps its version: a lower one does not replace it, a higher one does.
	require.NoError(t, s.PutBatch(ctx, []storage.Row{{PKey: p, CCols: []byte("a"), Value: []byte("low"), Version: 5}}))
	v, _, err := s.Get(ctx, p, []byte("a"))
	require.NoError(t, err)
	require.Equal(t, "a1", string(v))
	require.NoError(t, s.PutBatch(ctx, []storage.Row{{PKey: p, CCols: []byte("a"), Value: []byte("high"), Version: 11}}))
	v, _, err = s.Get(ctx, p, []byte("a"))
	require.NoError(t, err)
	require.Equal(t, "high", string(v))

	// The backup is a copy: writes after Restore do not change it.
	require.NoError(t, s.Restore(b))
	v, _, err = s.Get(ctx, p, []byte("a"))
	require.NoError(t, err)
	require.Equal(t, "a1", string(v))

	require.NoError(t, s.Close())
	_, err = s.Backup()
	require.ErrorIs(t, err, storage.ErrClosed)
	require.ErrorIs(t, s.Restore(b), storage.ErrClosed)
}
