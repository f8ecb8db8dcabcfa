package plogcheck

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
)

// The acknowledgement log (cqlseq bench --ack-log, verify --acks) is a
// text file with one line per acknowledged command:
//
//	<partition> <offset> <WSID> <SeqID>:<number>[,<SeqID>:<number>...]\n
//
// and comment lines starting with '#' (empty lines are skipped too). A
// writer appends a command's line once its event is durable in the PLog
// and fsyncs the file before it counts the command as done, so after a
// crash every command the process counted has its line. A last line
// without its '\n' is a write the crash cut short: its command was never
// counted, and every reader here ignores it (AckLogWriter cuts it before
// appending).

// Ack is one acknowledged command.
type Ack struct {
	// Line is the command's line in its ack log (from 1; 0: not read
	// from a file).
	Line      int
	Partition isequencer.PartitionID
	Offset    isequencer.PLogOffset // > 0
	WSID      isequencer.WSID       // > 0
	Numbers   []plog.SeqNumber
	// Payload, if not nil, is the payload the command's event must hold.
	// Ack logs carry none.
	Payload []byte
}

// AckLog is a parsed ack log.
type AckLog struct {
	Acks []Ack
	Torn int // bytes of a last line without '\n' (ignored)
}

// CompleteLines splits b, an ack log's content, into its complete lines
// (up to and with its last '\n') and the torn last line after them.
func CompleteLines(b []byte) (complete, torn []byte) {
	i := bytes.LastIndexByte(b, '\n') + 1
	return b[:i], b[i:]
}

// isAckLine reports whether a complete line (without its '\n') is an
// acknowledgement rather than a comment or an empty line.
func isAckLine(line []byte) bool { return len(line) > 0 && line[0] != '#' }

// ReadAckLog parses the ack log at path (see ParseAckLog).
func ReadAckLog(path string) (*AckLog, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("plogcheck: ack log: %w", err)
	}
	return ParseAckLog(path, b)
}

// ParseAckLog parses an ack log's content; name is what errors call it. A
// last line without '\n' is ignored (counted in Torn); any other line that
// does not parse is an error naming it.
func ParseAckLog(name string, b []byte) (*AckLog, error) {
	b, torn := CompleteLines(b)
	out := &AckLog{Torn: len(torn)}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if !isAckLine(sc.Bytes()) {
			continue
		}
		s := sc.Text()
		a, err := ParseAck(s)
		if err != nil {
			return nil, fmt.Errorf("plogcheck: ack log %s line %d %q: %w", name, line, s, err)
		}
		a.Line = line
		out.Acks = append(out.Acks, a)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("plogcheck: ack log %s: %w", name, err)
	}
	return out, nil
}

// ParseAck parses one acknowledgement line, without its '\n'. Every
// problem of the line is in the error.
func ParseAck(s string) (Ack, error) {
	f := strings.Fields(s)
	if len(f) != 4 {
		return Ack{}, errors.New("want 4 fields: partition, offset, WSID, SeqID:number[,SeqID:number]")
	}
	var a Ack
	var errs []error
	num := func(what, v string, bits int) uint64 {
		n, err := strconv.ParseUint(v, 10, bits)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", what, v, err))
		}
		return n
	}
	a.Partition = isequencer.PartitionID(num("partition", f[0], 16))
	a.Offset = isequencer.PLogOffset(num("offset", f[1], 64))
	a.WSID = isequencer.WSID(num("WSID", f[2], 64))
	for _, p := range strings.Split(f[3], ",") {
		id, n, ok := strings.Cut(p, ":")
		if !ok {
			errs = append(errs, fmt.Errorf("number %q: want SeqID:number", p))
			continue
		}
		a.Numbers = append(a.Numbers, plog.SeqNumber{SeqID: isequencer.SeqID(num("SeqID", id, 16)), Number: isequencer.Number(num("number", n, 64))})
	}
	if a.Offset == 0 || a.WSID == 0 {
		errs = append(errs, errors.New("offset and WSID must be > 0"))
	}
	return a, errors.Join(errs...)
}

// AppendAck appends one acknowledged command's line, '\n' included: the
// command took nums[i] of seqs[i] (len(seqs) >= len(nums) > 0).
func AppendAck(b []byte, part isequencer.PartitionID, off isequencer.PLogOffset, ws isequencer.WSID, seqs []isequencer.SeqID, nums []isequencer.Number) []byte {
	b = strconv.AppendUint(b, uint64(part), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(off), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(ws), 10)
	for i, n := range nums {
		if i == 0 {
			b = append(b, ' ')
		} else {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(seqs[i]), 10)
		b = append(b, ':')
		b = strconv.AppendUint(b, uint64(n), 10)
	}
	return append(b, '\n')
}

// AckLogWriter appends acknowledged commands to an ack log and fsyncs
// them in groups: the first caller to find no sync in progress writes and
// fsyncs every line appended so far, and the callers whose lines that
// covered return together. Safe for concurrent use; no goroutine of its
// own.
type AckLogWriter struct {
	f    *os.File
	path string
	mu   struct {
		sync.Mutex
		cond    *sync.Cond
		pending []byte // lines appended, not yet written
		spare   []byte
		seq     uint64 // lines appended
		synced  uint64 // lines written and fsynced
		syncs   uint64 // fsyncs done
		syncing bool
		err     error // a failed write or fsync: every later Ack fails
	}
}

// OpenAckLog opens path for appending (creating it), first cutting off a
// torn last line left by a crash, and writes and fsyncs a comment line
// with header. It returns how many bytes it cut.
func OpenAckLog(path, header string) (*AckLogWriter, int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("plogcheck: ack log: %w", err)
	}
	cut, err := cutTornLine(f)
	if err == nil {
		_, err = f.Seek(0, io.SeekEnd)
	}
	if err == nil {
		_, err = fmt.Fprintf(f, "# %s\n", strings.ReplaceAll(header, "\n", " "))
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		_ = f.Close()
		return nil, 0, fmt.Errorf("plogcheck: ack log %s: %w", path, err)
	}
	l := &AckLogWriter{f: f, path: path}
	l.mu.cond = sync.NewCond(&l.mu.Mutex)
	return l, cut, nil
}

// cutTornLine truncates f after its last '\n' and returns the bytes cut.
func cutTornLine(f *os.File) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	const chunk = 4096
	buf := make([]byte, chunk)
	for end := size; end > 0; {
		start := max(0, end-chunk)
		n, err := f.ReadAt(buf[:end-start], start)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if complete, _ := CompleteLines(buf[:n]); len(complete) > 0 {
			keep := start + int64(len(complete))
			if keep == size {
				return 0, nil
			}
			return size - keep, f.Truncate(keep)
		}
		end = start
	}
	if size == 0 {
		return 0, nil
	}
	return size, f.Truncate(0)
}

// Ack appends the command's line (see AppendAck) and returns once it is
// fsynced. After a failed write or fsync, every Ack fails.
func (l *AckLogWriter) Ack(part isequencer.PartitionID, off isequencer.PLogOffset, ws isequencer.WSID, seqs []isequencer.SeqID, nums []isequencer.Number) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.err != nil {
		return l.mu.err
	}
	l.mu.pending = AppendAck(l.mu.pending, part, off, ws, seqs, nums)
	l.mu.seq++
	mine := l.mu.seq
	for l.mu.synced < mine {
		if l.mu.err != nil {
			return l.mu.err
		}
		if l.mu.syncing {
			l.mu.cond.Wait()
			continue
		}
		buf, upto := l.mu.pending, l.mu.seq
		l.mu.pending, l.mu.spare = l.mu.spare[:0], nil
		l.mu.syncing = true
		l.mu.Unlock()
		_, err := l.f.Write(buf)
		if err == nil {
			err = l.f.Sync()
		}
		l.mu.Lock()
		l.mu.syncing = false
		l.mu.spare = buf
		l.mu.syncs++
		if err != nil {
			l.mu.err = fmt.Errorf("plogcheck: ack log %s: %w", l.path, err)
		} else {
			l.mu.synced = upto
		}
		l.mu.cond.Broadcast()
	}
	return nil
}

// Syncs returns the fsyncs done by Ack so far.
func (l *AckLogWriter) Syncs() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.mu.syncs
}

// Close closes the file. Every Ack must have returned.
func (l *AckLogWriter) Close() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("plogcheck: ack log %s: %w", l.path, err)
	}
	return nil
}

// AckCounter counts the acknowledgements of a growing ack log: its
// complete acknowledgement lines. It reads only what was appended since
// the last Count, so sampling a long log stays cheap, and parses no line.
// Not safe for concurrent use.
type AckCounter struct {
	path string
	pos  int64 // bytes consumed: up to the end of the last complete line
	acks int
	buf  []byte
}

// NewAckCounter returns a counter of path's acknowledgements (the file
// need not exist yet: it counts 0 until it does).
func NewAckCounter(path string) *AckCounter {
	return &AckCounter{path: path, buf: make([]byte, 64<<10)}
}

// Count returns the complete acknowledgement lines of the file now. A file
// that shrank (a writer cut a torn last line, or the file was replaced) is
// counted again from its start.
func (c *AckCounter) Count() (int, error) {
	f, err := os.Open(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return c.acks, nil
	}
	if err != nil {
		return 0, fmt.Errorf("plogcheck: counting acks: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("plogcheck: counting acks: %w", err)
	}
	if fi.Size() < c.pos {
		c.pos, c.acks = 0, 0
	}
	for {
		n, err := f.ReadAt(c.buf, c.pos)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, fmt.Errorf("plogcheck: counting acks: %w", err)
		}
		used := c.scan(c.buf[:n])
		if n < len(c.buf) {
			return c.acks, nil // the end of the file
		}
		if used == 0 { // one line longer than the buffer
			c.buf = make([]byte, 2*len(c.buf))
		}
	}
}

// scan counts the acknowledgements among the complete lines of b and
// returns the bytes those lines take. The bytes after the last '\n' are a
// line not complete yet (or torn): the next Count reads them again.
func (c *AckCounter) scan(b []byte) int {
	complete, _ := CompleteLines(b)
	for line := range bytes.Lines(complete) {
		if isAckLine(line[:len(line)-1]) {
			c.acks++
		}
	}
	c.pos += int64(len(complete))
	return len(complete)
}
