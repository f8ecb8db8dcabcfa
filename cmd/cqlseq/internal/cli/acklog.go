package cli

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/storage"
)

// The acknowledgement log (bench --ack-log, verify --acks) is a text file
// with one line per acknowledged command:
//
//	<partition> <offset> <WSID> <SeqID>:<number>[,<SeqID>:<number>...]\n
//
// and comment lines starting with '#'. bench appends a command's line once
// Do has returned it (its event durable in the PLog) and fsyncs the file
// before it counts the command as done, so after a crash every command the
// process counted has its line. A last line without its '\n' is a write the
// crash cut short: its command was never counted, and both the next bench
// (which truncates it before appending) and verify ignore it.

// ackLog appends acknowledged commands to a file and fsyncs them in
// groups: the first caller to find no sync in progress writes and fsyncs
// every line appended so far, and the callers whose lines that covered
// return together. Safe for concurrent use; no goroutine of its own.
type ackLog struct {
	f    *os.File
	path string
	mu   struct {
		sync.Mutex
		cond    *sync.Cond
		pending []byte // lines appended, not yet written
		spare   []byte
		seq     uint64 // lines appended
		synced  uint64 // lines written and fsynced
		syncing bool
		err     error // a failed write or fsync: every later append fails
	}
	syncs uint64 // fsyncs done; read after the load has stopped
}

// openAckLog opens path for appending (creating it), first cutting off a
// torn last line left by a crash, and writes a comment naming the run.
// It returns how many bytes it cut.
func openAckLog(path, header string) (*ackLog, int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, fmt.Errorf("ack log: %w", err)
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
		return nil, 0, fmt.Errorf("ack log %s: %w", path, err)
	}
	l := &ackLog{f: f, path: path}
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
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			keep := start + int64(i) + 1
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

// appendAck formats one acknowledged command's line.
func appendAck(b []byte, part isequencer.PartitionID, off isequencer.PLogOffset, ws isequencer.WSID, seqs []isequencer.SeqID, nums []isequencer.Number) []byte {
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

// Ack appends the command's line and returns once it is fsynced.
func (l *ackLog) Ack(part isequencer.PartitionID, off isequencer.PLogOffset, ws isequencer.WSID, seqs []isequencer.SeqID, nums []isequencer.Number) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.err != nil {
		return l.mu.err
	}
	l.mu.pending = appendAck(l.mu.pending, part, off, ws, seqs, nums)
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
		l.syncs++
		if err != nil {
			l.mu.err = fmt.Errorf("ack log %s: %w", l.path, err)
		} else {
			l.mu.synced = upto
		}
		l.mu.cond.Broadcast()
	}
	return nil
}

// Close closes the file; every Ack has returned.
func (l *ackLog) Close() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("ack log %s: %w", l.path, err)
	}
	return nil
}

// ackRecord is one parsed line of an ack log.
type ackRecord struct {
	line    int
	part    isequencer.PartitionID
	off     isequencer.PLogOffset
	ws      isequencer.WSID
	numbers []plog.SeqNumber
}

// ackFile is a parsed ack log.
type ackFile struct {
	acks []ackRecord
	torn int // bytes of a last line without '\n' (ignored)
}

// readAckLog parses the ack log at path. A last line without '\n' is
// ignored (counted in torn); any other line that does not parse is an
// error naming it.
func readAckLog(path string) (*ackFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("ack log: %w", err)
	}
	return parseAckLog(path, b)
}

func parseAckLog(name string, b []byte) (*ackFile, error) {
	out := &ackFile{}
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		out.torn = len(b) - (i + 1)
		b = b[:i+1]
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for line := 1; sc.Scan(); line++ {
		s := sc.Text()
		if s == "" || s[0] == '#' {
			continue
		}
		a, err := parseAck(s)
		if err != nil {
			return nil, fmt.Errorf("ack log %s line %d %q: %w", name, line, s, err)
		}
		a.line = line
		out.acks = append(out.acks, a)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("ack log %s: %w", name, err)
	}
	return out, nil
}

func parseAck(s string) (ackRecord, error) {
	f := strings.Fields(s)
	if len(f) != 4 {
		return ackRecord{}, errors.New("want 4 fields: partition, offset, WSID, SeqID:number[,SeqID:number]")
	}
	var a ackRecord
	var errs []error
	num := func(what, v string, bits int) uint64 {
		n, err := strconv.ParseUint(v, 10, bits)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", what, v, err))
		}
		return n
	}
	a.part = isequencer.PartitionID(num("partition", f[0], 16))
	a.off = isequencer.PLogOffset(num("offset", f[1], 64))
	a.ws = isequencer.WSID(num("WSID", f[2], 64))
	for _, p := range strings.Split(f[3], ",") {
		id, n, ok := strings.Cut(p, ":")
		if !ok {
			errs = append(errs, fmt.Errorf("number %q: want SeqID:number", p))
			continue
		}
		a.numbers = append(a.numbers, plog.SeqNumber{SeqID: isequencer.SeqID(num("SeqID", id, 16)), Number: isequencer.Number(num("number", n, 64))})
	}
	if a.off == 0 || a.ws == 0 {
		errs = append(errs, errors.New("offset and WSID must be > 0"))
	}
	return a, errors.Join(errs...)
}

// Ack-check finding kinds (besides the scan's duplicate and regression).
const (
	findLost       = "lost"
	findLostRecord = "lost record"
)

// ackResult is what checkAcks found.
type ackResult struct {
	Acks       int               `json:"acks"`
	Torn       int               `json:"torn_bytes"`
	Partitions int               `json:"partitions"`
	Records    int               `json:"records"` // record rows checked
	Problems   uint64            `json:"problems"`
	ByKind     map[string]uint64 `json:"by_kind,omitempty"`
	Listed     []finding         `json:"listed,omitempty"`
}

func (r *ackResult) add(kind, format string, a ...any) {
	addFinding(&r.Problems, &r.ByKind, &r.Listed, kind, fmt.Sprintf(format, a...))
}

// plogEvent is what checkAcks keeps of a PLog event.
type plogEvent struct {
	ws      isequencer.WSID
	numbers []plog.SeqNumber
}

// checkAcks checks every acknowledged command of f against the PLog and
// the record rows of st. The log is one application's (as bench writes
// it): its numbers belong to (WSID, SeqID) whatever the partition.
//
//   - lost: no event at the acknowledged offset (the PLog read from offset
//     1 up to its first missing offset, as a restart reads it), or an event
//     of another workspace or with other numbers than were acknowledged;
//   - lost record: an acknowledged command whose event is in the PLog, and
//     one of whose numbers of recordSeqs (its record IDs) has no record
//     row, or a row that names another offset (a command whose event is
//     lost is reported once, as lost);
//   - duplicate: one (partition, offset) acknowledged twice, with the same
//     numbers or not (an event lost and written again in its place), or
//     two acknowledged commands that got the same number of one (WSID,
//     SeqID), in one partition or in two;
//   - regression: an acknowledged number at a higher offset of a partition
//     is below one at a lower offset of the same partition and (WSID,
//     SeqID).
func checkAcks(ctx context.Context, st storage.Storage, f *ackFile, recordSeqs []isequencer.SeqID) (*ackResult, error) {
	r := &ackResult{Acks: len(f.acks), Torn: f.torn}
	byPart := map[isequencer.PartitionID][]ackRecord{}
	for _, a := range f.acks {
		byPart[a.part] = append(byPart[a.part], a)
	}
	r.Partitions = len(byPart)
	reader, err := plog.NewReader(st, plog.ReaderOptions{PageTimeout: scanPageTimeout})
	if err != nil {
		return nil, err
	}
	parts := make([]isequencer.PartitionID, 0, len(byPart))
	for p := range byPart {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	var present []ackRecord // acks whose event the PLog holds as acknowledged
	for _, part := range parts {
		events := map[isequencer.PLogOffset]plogEvent{}
		err := reader.ReadEvents(ctx, part, 1, func(e *plog.Event) error {
			events[e.Offset] = plogEvent{ws: e.WSID, numbers: slices.Clone(e.Numbers)}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("partition %d: %w", part, err)
		}
		present = checkPartitionAcks(r, part, byPart[part], events, present)
	}
	checkDuplicateAcks(r, f.acks)
	if err := checkRecords(ctx, r, st, present, recordSeqs); err != nil {
		return nil, err
	}
	return r, nil
}

// checkPartitionAcks reports the lost events and the regressions among
// one partition's acks, and returns present with the acks whose event the
// PLog holds as acknowledged appended.
func checkPartitionAcks(r *ackResult, part isequencer.PartitionID, acks []ackRecord, events map[isequencer.PLogOffset]plogEvent, present []ackRecord) []ackRecord {
	type pt struct {
		off isequencer.PLogOffset
		n   isequencer.Number
	}
	byKey := map[isequencer.NumberKey][]pt{}
	for _, a := range acks {
		e, ok := events[a.off]
		switch {
		case !ok:
			r.add(findLost, "partition %d offset %d (ack log line %d): acknowledged, not in the PLog", part, a.off, a.line)
		case e.ws != a.ws || !sameNumbers(e.numbers, a.numbers):
			r.add(findLost, "partition %d offset %d (ack log line %d): acknowledged WSID %d %v, the PLog holds WSID %d %v",
				part, a.off, a.line, a.ws, a.numbers, e.ws, e.numbers)
		default:
			present = append(present, a)
		}
		for _, n := range a.numbers {
			k := isequencer.NumberKey{WSID: a.ws, SeqID: n.SeqID}
			byKey[k] = append(byKey[k], pt{a.off, n.Number})
		}
	}
	// Regressions: per key, numbers ordered by offset must increase.
	keys := slices.SortedFunc(maps.Keys(byKey), func(a, b isequencer.NumberKey) int {
		return cmp.Or(cmp.Compare(a.WSID, b.WSID), cmp.Compare(a.SeqID, b.SeqID))
	})
	for _, k := range keys {
		pts := byKey[k]
		slices.SortFunc(pts, func(a, b pt) int { return cmp.Or(cmp.Compare(a.off, b.off), cmp.Compare(a.n, b.n)) })
		for i := 1; i < len(pts); i++ {
			if pts[i].off != pts[i-1].off && pts[i].n < pts[i-1].n {
				r.add(findRegression, "partition %d WSID %d SeqID %d: number %d acknowledged at offset %d is below %d at offset %d",
					part, k.WSID, k.SeqID, pts[i].n, pts[i].off, pts[i-1].n, pts[i-1].off)
			}
		}
	}
	return present
}

// checkDuplicateAcks reports every (partition, offset) acknowledged more
// than once, and every number of a (WSID, SeqID) acknowledged by two
// commands at different places, across all partitions.
func checkDuplicateAcks(r *ackResult, acks []ackRecord) {
	type place struct {
		part isequencer.PartitionID
		off  isequencer.PLogOffset
	}
	type seen struct {
		place
		line int
	}
	byOffset := map[place]int{} // the first line that acknowledged it
	byNumber := map[isequencer.NumberKey]map[isequencer.Number]seen{}
	for _, a := range acks {
		at := place{a.part, a.off}
		if first, dup := byOffset[at]; dup {
			r.add(findDuplicate, "partition %d offset %d: acknowledged twice (ack log lines %d and %d)", a.part, a.off, first, a.line)
			continue // its numbers are that offset's: reported once, here
		}
		byOffset[at] = a.line
		for _, n := range a.numbers {
			k := isequencer.NumberKey{WSID: a.ws, SeqID: n.SeqID}
			m := byNumber[k]
			if m == nil {
				m = map[isequencer.Number]seen{}
				byNumber[k] = m
			}
			if prev, dup := m[n.Number]; dup {
				r.add(findDuplicate, "WSID %d SeqID %d: number %d acknowledged at partition %d offset %d (line %d) and at partition %d offset %d (line %d)",
					k.WSID, k.SeqID, n.Number, prev.part, prev.off, prev.line, a.part, a.off, a.line)
				continue
			}
			m[n.Number] = seen{at, a.line}
		}
	}
}

// recordBatch bounds the record rows of one GetBatch.
const recordBatch = 1024

// checkRecords reports every record ID of acks (their numbers of
// recordSeqs) whose record row is missing or names another offset.
func checkRecords(ctx context.Context, r *ackResult, st storage.Storage, acks []ackRecord, recordSeqs []isequencer.SeqID) error {
	type want struct {
		a  *ackRecord
		id plog.RecordID
	}
	byPKey := map[string][]want{}
	for i := range acks {
		a := &acks[i]
		for _, n := range a.numbers {
			if slices.Contains(recordSeqs, n.SeqID) {
				id := plog.RecordID(n.Number)
				pk := string(plog.RecordPKey(a.ws, id))
				byPKey[pk] = append(byPKey[pk], want{a, id})
			}
		}
	}
	for _, pk := range slices.Sorted(maps.Keys(byPKey)) {
		ws := byPKey[pk]
		for len(ws) > 0 {
			chunk := ws[:min(len(ws), recordBatch)]
			ws = ws[len(chunk):]
			items := make([]storage.GetItem, len(chunk))
			for i, w := range chunk {
				items[i].CCols = plog.RecordCCols(w.id)
			}
			if err := st.GetBatch(ctx, []byte(pk), items); err != nil {
				return fmt.Errorf("reading record rows: %w", err)
			}
			for i, w := range chunk {
				r.Records++
				a := w.a
				switch {
				case !items[i].Ok:
					r.add(findLostRecord, "partition %d offset %d (ack log line %d): record %d of WSID %d is not stored", a.part, a.off, a.line, w.id, a.ws)
				case !bytes.Equal(items[i].Value, plog.RecordValue(a.off)):
					r.add(findLostRecord, "partition %d offset %d (ack log line %d): record %d of WSID %d names offset %s", a.part, a.off, a.line, w.id, a.ws, recordOffset(items[i].Value))
				}
			}
		}
	}
	return nil
}

// recordOffset formats a record row's value: the offset it names.
func recordOffset(v []byte) string {
	if len(v) != 8 {
		return fmt.Sprintf("? (a value of %d bytes)", len(v))
	}
	return strconv.FormatUint(binary.BigEndian.Uint64(v), 10)
}

// sameNumbers reports whether a and b hold the same (SeqID, number) pairs,
// in any order.
func sameNumbers(a, b []plog.SeqNumber) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(x, y plog.SeqNumber) int {
		if x.SeqID != y.SeqID {
			return cmp.Compare(uint64(x.SeqID), uint64(y.SeqID))
		}
		return cmp.Compare(uint64(x.Number), uint64(y.Number))
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, key)
	slices.SortFunc(b, key)
	return slices.Equal(a, b)
}

// printAcks prints checkAcks's findings. The head of its summary
// ("OK, 0 lost, 0 duplicates, 0 regressions" or "FAILED, N lost, N
// duplicates, N regressions") is read by cqlseq-torture: new counts go
// after it.
func printAcks(w io.Writer, path string, r *ackResult) {
	fmt.Fprintf(w, "acks %s: %s acknowledged commands in %s", path, commas(uint64(r.Acks)), plural(uint64(r.Partitions), "partition", "partitions"))
	if r.Torn > 0 {
		fmt.Fprintf(w, " (a torn last line of %d bytes ignored)", r.Torn)
	}
	if r.Problems == 0 {
		fmt.Fprintf(w, ": OK, 0 lost, 0 duplicates, 0 regressions, 0 lost records (%s record rows checked)\n", commas(uint64(r.Records)))
		return
	}
	fmt.Fprintf(w, ": FAILED, %d lost, %d duplicates, %d regressions, %d lost records\n", r.ByKind[findLost], r.ByKind[findDuplicate], r.ByKind[findRegression], r.ByKind[findLostRecord])
	for _, f := range r.Listed {
		fmt.Fprintf(w, "  %s: %s\n", f.Kind, f.Text)
	}
}

// startAckLog opens bench's ack log, saying on stderr if it cut a torn
// line.
func startAckLog(e *env, path string, rep *benchReport) (*ackLog, error) {
	al, cut, err := openAckLog(path, fmt.Sprintf("cqlseq bench pid %d: %s, mode %s, app %d, %d partitions",
		os.Getpid(), rep.Store, rep.Mode, rep.App, rep.Partitions))
	if err != nil {
		return nil, err
	}
	if cut > 0 {
		fmt.Fprintf(e.stderr, "ack log %s: cut a torn last line of %d bytes (a write a crash cut short; its command was never counted)\n", path, cut)
	}
	return al, nil
}

// verifyAcks reads the ack log at path, checks it against st and prints
// the findings.
func verifyAcks(ctx context.Context, e *env, st storage.Storage, path string) (*ackResult, error) {
	f, err := readAckLog(path)
	if err != nil {
		return nil, err
	}
	r, err := checkAcks(ctx, st, f, []isequencer.SeqID{seqRecords})
	if err != nil {
		return nil, fmt.Errorf("checking ack log %s: %w", path, err)
	}
	printAcks(e.stdout, path, r)
	return r, nil
}
