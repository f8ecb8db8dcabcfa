package plogcheck

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogcheck/plogchecktest"
)

func TestAckLineFormatIsPinned(t *testing.T) {
	b := AppendAck(nil, 3, 1234, 77, []isequencer.SeqID{1, 2}, []isequencer.Number{5, 9})
	require.Equal(t, "3 1234 77 1:5,2:9\n", string(b))
	a, err := ParseAck(strings.TrimSuffix(string(b), "\n"))
	require.NoError(t, err)
	require.Equal(t, Ack{Partition: 3, Offset: 1234, WSID: 77, Numbers: []plog.SeqNumber{{SeqID: 1, Number: 5}, {SeqID: 2, Number: 9}}}, a)
}

func TestAckLogToleratesOnlyATornLastLine(t *testing.T) {
	f, err := ParseAckLog("x", []byte("# header\n0 1 7 1:5,2:1\n\n0 2 7 1:6,2:2\n0 3 7 1:"))
	require.NoError(t, err)
	require.Len(t, f.Acks, 2)
	assert.Equal(t, []int{2, 4}, []int{f.Acks[0].Line, f.Acks[1].Line}, "lines count comments and empty lines")
	require.Equal(t, len("0 3 7 1:"), f.Torn)
	_, err = ParseAckLog("x", []byte("0 1 7 1:5,2:1\n0 2 7 1:\n0 3 7 1:7,2:3\n"))
	require.ErrorContains(t, err, "line 2")
	_, err = ParseAckLog("x", []byte("0 1 7\n"))
	require.ErrorContains(t, err, "line 1")
	_, err = ParseAckLog("x", []byte("x 5 6 1:1\n"))
	require.ErrorContains(t, err, `partition "x"`)
	_, err = ReadAckLog(filepath.Join(t.TempDir(), "none"))
	require.Error(t, err)
}

func TestCompleteLines(t *testing.T) {
	for _, tt := range []struct{ in, wcomplete, wtorn string }{
		{"", "", ""},
		{"0 1", "", "0 1"},
		{"0 1 2 1:1\n", "0 1 2 1:1\n", ""},
		{"# x\n0 1 2 1:1\n0 2", "# x\n0 1 2 1:1\n", "0 2"},
	} {
		c, torn := CompleteLines([]byte(tt.in))
		assert.Equal(t, tt.wcomplete, string(c), "%q", tt.in)
		assert.Equal(t, tt.wtorn, string(torn), "%q", tt.in)
	}
}

func TestAckLogGroupsFsyncsAndCutsATornLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acks")
	require.NoError(t, os.WriteFile(path, []byte("0 1 7 1:5,2:1\n0 2 7 1:6"), 0o644))
	l, cut, err := OpenAckLog(path, "test")
	require.NoError(t, err)
	require.Equal(t, int64(len("0 2 7 1:6")), cut)
	const writers, each = 16, 200
	seqs := []isequencer.SeqID{1, 2}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				off := isequencer.PLogOffset(10 + w*each + i)
				assert.NoError(t, l.Ack(1, off, 9, seqs, []isequencer.Number{isequencer.Number(off), 1}))
			}
		}()
	}
	wg.Wait()
	require.NoError(t, l.Close())
	require.Less(t, l.Syncs(), uint64(writers*each), "fsyncs are shared by concurrent acks")
	f, err := ReadAckLog(path)
	require.NoError(t, err)
	require.Zero(t, f.Torn)
	require.Len(t, f.Acks, 1+writers*each, "the torn line was cut; every ack is a whole line")
}

func TestAckLogCutsAWholeTornFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acks")
	require.NoError(t, os.WriteFile(path, []byte("0 1 7 1:"), 0o644))
	l, cut, err := OpenAckLog(path, "second\nrun")
	require.NoError(t, err)
	require.Equal(t, int64(len("0 1 7 1:")), cut)
	require.NoError(t, l.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "# second run\n", string(b))
}

func TestAckCounterCountsCompleteAckLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "acks.log")
	c := NewAckCounter(p)
	n, err := c.Count()
	require.NoError(t, err)
	require.Zero(t, n, "no file yet")

	plogchecktest.AppendAckLog(t, p, "# bench header\n0 1 5 1:1,2:1\n1 1 6 1:1")
	n, err = c.Count()
	require.NoError(t, err)
	require.Equal(t, 1, n, "the torn last line is not counted")

	plogchecktest.AppendAckLog(t, p, ",2:1\n\n# another run\n0 2 7 1:2,2:2\n")
	n, err = c.Count()
	require.NoError(t, err)
	require.Equal(t, 3, n, "the completed line counts once, comments and empty lines never")

	// A new bench cuts a torn tail: the file shrank, it is counted again.
	plogchecktest.AppendAckLog(t, p, "0 3 7 1:")
	require.NoError(t, os.Truncate(p, int64(len("# bench header\n0 1 5 1:1,2:1\n"))))
	n, err = c.Count()
	require.NoError(t, err)
	require.Equal(t, 1, n)

	// The counter and the parser agree.
	plogchecktest.AppendAckLog(t, p, "\n# c\n0 4 7 1:3\n0 5 7 1:")
	n, err = c.Count()
	require.NoError(t, err)
	f, err := ReadAckLog(p)
	require.NoError(t, err)
	require.Equal(t, len(f.Acks), n)
}

func TestAckCounterReadsLinesLongerThanItsBuffer(t *testing.T) {
	p := filepath.Join(t.TempDir(), "acks.log")
	c := NewAckCounter(p)
	c.buf = make([]byte, 8)
	plogchecktest.AppendAckLog(t, p, "0 1 5 1:1,2:1,3:1,4:1\n0 2 5 1:2\n#c\n0 3")
	n, err := c.Count()
	require.NoError(t, err)
	require.Equal(t, 2, n)
	plogchecktest.AppendAckLog(t, p, " 5 1:3\n")
	n, err = c.Count()
	require.NoError(t, err)
	require.Equal(t, 3, n)
}
