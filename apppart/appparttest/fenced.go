package appparttest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cqlseq/cqlseq/apppart"
	"github.com/cqlseq/cqlseq/isequencer"
	"github.com/cqlseq/cqlseq/plog"
	"github.com/cqlseq/cqlseq/plog/plogcheck"
	"github.com/cqlseq/cqlseq/plog/plogtest"
	"github.com/cqlseq/cqlseq/storage"
	"github.com/cqlseq/cqlseq/storage/faulty"
)

// Acked is what an owner acknowledged: the event's offset, the command's
// numbers and its payload.
type Acked struct {
	Owner   string
	Cmd     apppart.Command
	Result  apppart.Result
	Payload string
}

// VerifyPLog checks the partition's PLog with plogcheck, from offset 1 to
// its first missing offset, and fails on any finding: a number that
// appears in two events for one (WSID, SeqID) or goes back (Partition,
// without the stored numbers), or an acknowledged command whose event is
// not stored at its offset with its WSID, numbers and payload (Acks). It
// returns the number of events.
func VerifyPLog(t testing.TB, st storage.Storage, part isequencer.PartitionID, acked []Acked) int {
	t.Helper()
	ctx := context.Background()
	rd, err := plog.NewReader(st, plog.ReaderOptions{})
	require.NoError(t, err)
	pr, err := plogcheck.Partition(ctx, rd, part, plogcheck.PartitionOptions{})
	require.NoError(t, err)
	requireNoFindings(t, fmt.Sprintf("partition %d's PLog", part), &pr.Findings)
	log := &plogcheck.AckLog{Acks: make([]plogcheck.Ack, len(acked))}
	for i, a := range acked {
		ack := plogcheck.Ack{Line: i + 1, Partition: part, Offset: a.Result.Offset, WSID: a.Cmd.WSID, Payload: []byte(a.Payload)}
		for j, id := range a.Cmd.Seqs {
			ack.Numbers = append(ack.Numbers, plog.SeqNumber{SeqID: id, Number: a.Result.Numbers[j]})
		}
		log.Acks[i] = ack
	}
	ar, err := plogcheck.Acks(ctx, rd, log, plogcheck.AckOptions{})
	require.NoError(t, err)
	for _, f := range ar.Listed {
		for _, line := range []int{f.Line, f.PrevLine} {
			if line > 0 {
				t.Logf("ack %d (offset %d) is %s's", line, acked[line-1].Result.Offset, acked[line-1].Owner)
			}
		}
	}
	requireNoFindings(t, fmt.Sprintf("partition %d's acknowledged commands", part), &ar.Findings)
	return int(pr.Events)
}

// requireNoFindings fails, listing the findings, unless there are none.
func requireNoFindings(t testing.TB, what string, f *plogcheck.Findings) {
	t.Helper()
	if f.OK() {
		return
	}
	var b strings.Builder
	for _, fd := range f.Listed {
		fmt.Fprintf(&b, "\n  %s", fd)
	}
	if n := f.Unlisted(); n > 0 {
		fmt.Fprintf(&b, "\n  and %d more", n)
	}
	t.Fatalf("%s: %d problems%s", what, f.Problems, b.String())
}

// owner runs commands on one fenced partition and records what it acked.
type owner struct {
	name  string
	p     *apppart.Partition
	mu    sync.Mutex
	acked []Acked
	seq   int
	pad   int // bytes added to each payload
}

func (o *owner) do(t testing.TB, ws isequencer.WSID) (apppart.Result, error) {
	o.mu.Lock()
	o.seq++
	payload := fmt.Sprintf("%s-%d", o.name, o.seq)
	if o.pad > 0 {
		payload += "-" + strings.Repeat("x", o.pad)
	}
	o.mu.Unlock()
	cmd := Cmd(ws)
	cmd.Payload = []byte(payload)
	r, err := Do(t, o.p, cmd)
	if err == nil {
		o.mu.Lock()
		o.acked = append(o.acked, Acked{Owner: o.name, Cmd: cmd, Result: r, Payload: payload})
		o.mu.Unlock()
	}
	return r, err
}

func openOwner(t testing.TB, name string, o apppart.OpenOptions) *owner {
	t.Helper()
	return &owner{name: name, p: Open(t, o)}
}

// FencedGroupCommit runs concurrent commands on one fenced partition: all
// succeed, groups carry several events, a reopen continues above every
// number, and the PLog verifies.
func FencedGroupCommit(t *testing.T, st storage.Storage, part isequencer.PartitionID, workers, perWorker int) {
	// Each group write takes 2 ms at least, so that the workers' commands
	// queue behind it however the scheduler runs them (on a busy machine,
	// an instant mem store could commit every command before the next was
	// queued).
	slow, err := faulty.New(st, faulty.Options{Rules: []faulty.Rule{
		{Ops: []string{faulty.OpApplyBatchIf, faulty.OpApplyBatchesIf}, Action: faulty.Delay, Delay: 2 * time.Millisecond},
	}})
	require.NoError(t, err)
	o := Options(slow, part, plog.ModeFenced)
	a := openOwner(t, "A", o)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				if _, err := a.do(t, WS(part, 1+(w*perWorker+i)%50)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	groups, events := a.p.GroupStats()
	require.Equal(t, workers*perWorker, events)
	t.Logf("%d events in %d groups (%.1f per group), epoch %d", events, groups, float64(events)/float64(groups), a.p.Epoch())
	if workers > 1 {
		assert.Less(t, groups, events, "concurrent commands share groups")
	}
	require.NoError(t, a.p.Close())

	b := openOwner(t, "B", o)
	assert.Greater(t, b.p.Epoch(), a.p.Epoch())
	maxes := Maxes{}
	for _, x := range a.acked {
		maxes.Add(x.Cmd, x.Result)
	}
	for i := range 50 {
		r, err := b.do(t, WS(part, 1+i))
		require.NoError(t, err)
		maxes.RequireAbove(t, b.acked[len(b.acked)-1].Cmd, r)
	}
	require.NoError(t, b.p.Close())
	n := VerifyPLog(t, st, part, append(a.acked, b.acked...))
	require.Equal(t, workers*perWorker+50, n)
}

// pause blocks a hook until released, after signalling that it was reached.
type pause struct {
	once    sync.Once
	reached chan struct{}
	release chan struct{}
	armed   chan struct{}
}

// free releases the paused hook (once).
func (p *pause) free() { p.once.Do(func() { close(p.release) }) }

func newPause() *pause {
	return &pause{reached: make(chan struct{}), release: make(chan struct{}), armed: make(chan struct{}, 1)}
}

// arm makes the next hit block.
func (p *pause) arm() { p.armed <- struct{}{} }

func (p *pause) hit() {
	select {
	case <-p.armed:
		close(p.reached)
		<-p.release
	default:
	}
}

// FencedTakeover: owner A (its own store from newStore) is paused at the
// given point while owner B (another store) takes the partition over and
// writes; then A resumes. Everything A writes after the takeover is
// refused, no acknowledged event is lost, no number appears in two events.
// at is "after-lease-check", "before-group-write" or "after-group-write".
func FencedTakeover(t *testing.T, newStore func(t testing.TB) storage.Storage, part isequencer.PartitionID, at string) {
	stA, stB := newStore(t), newStore(t)
	pz := newPause()
	oa := Options(stA, part, plog.ModeFenced)
	switch at {
	case "after-lease-check":
		oa.Hooks.AfterLeaseCheck = pz.hit
	case "before-group-write":
		oa.Hooks.BeforeGroupWrite = func(_, _ isequencer.PLogOffset) { pz.hit() }
	case "after-group-write":
		oa.Hooks.AfterGroupWrite = func(_, _ isequencer.PLogOffset) { pz.hit() }
	default:
		t.Fatalf("unknown pause point %q", at)
	}
	a := openOwner(t, "A", oa)
	// Cleanups run last-in first-out: a failing test frees the paused
	// owner before closing it.
	t.Cleanup(pz.free)
	for i := range 20 {
		_, err := a.do(t, WS(part, 1+i%5))
		require.NoError(t, err)
	}

	pz.arm()
	type res struct {
		r   apppart.Result
		err error
	}
	paused := make(chan res, 1)
	go func() {
		r, err := a.do(t, WS(part, 1))
		paused <- res{r, err}
	}()
	select {
	case <-pz.reached:
	case r := <-paused:
		t.Fatalf("A's command ended before its pause point %s: %v", at, r.err)
	case <-time.After(time.Minute):
		t.Fatalf("A never reached its pause point %s", at)
	}

	b := openOwner(t, "B", Options(stB, part, plog.ModeFenced))
	require.Greater(t, b.p.Epoch(), a.p.Epoch())
	for i := range 20 {
		_, err := b.do(t, WS(part, 1+i%5))
		require.NoError(t, err)
	}
	pz.free()
	got := <-paused
	switch at {
	case "after-group-write":
		// Its event was durable before the takeover: the acknowledgement
		// is right, and B replayed it.
		require.NoError(t, got.err)
	default:
		require.Error(t, got.err, "a write after the takeover must be refused")
		require.True(t, errors.Is(got.err, plog.ErrFenced) || errors.Is(got.err, apppart.ErrNotLeader),
			"refused as fenced: %v", got.err)
	}
	// A is stopped (or, after-group-write, stops at its next write).
	_, err := a.do(t, WS(part, 2))
	require.Error(t, err)
	require.True(t, errors.Is(err, plog.ErrFenced) || errors.Is(err, apppart.ErrStopped), "%v", err)

	for i := range 20 {
		_, err := b.do(t, WS(part, 1+i%5))
		require.NoError(t, err)
	}
	require.NoError(t, a.p.Close())
	require.NoError(t, b.p.Close())
	// Let A's sequencer state (written at epoch 1) meet B's: reopen and
	// check that numbers continue above everything acknowledged.
	c := openOwner(t, "C", Options(stB, part, plog.ModeFenced))
	maxes := Maxes{}
	for _, x := range append(a.acked, b.acked...) {
		maxes.Add(x.Cmd, x.Result)
	}
	for i := range 5 {
		r, err := c.do(t, WS(part, 1+i))
		require.NoError(t, err)
		maxes.RequireAbove(t, c.acked[len(c.acked)-1].Cmd, r)
	}
	require.NoError(t, c.p.Close())
	VerifyPLog(t, stB, part, append(append(a.acked, b.acked...), c.acked...))
}

// FencedHandOver moves ownership between two stores ten times; the
// deposed owner keeps trying to write after each hand-over.
func FencedHandOver(t *testing.T, newStore func(t testing.TB) storage.Storage, part isequencer.PartitionID) {
	stores := []storage.Storage{newStore(t), newStore(t)}
	var acked []Acked
	var prev *owner
	for round := range 10 {
		cur := openOwner(t, fmt.Sprintf("owner%d", round), Options(stores[round%2], part, plog.ModeFenced))
		for i := range 10 {
			_, err := cur.do(t, WS(part, 1+i%3))
			require.NoError(t, err, "round %d", round)
		}
		if prev != nil {
			_, err := prev.do(t, WS(part, 1))
			require.Error(t, err, "round %d: the deposed owner must be refused", round)
			require.NoError(t, prev.p.Close())
		}
		acked = append(acked, cur.acked...)
		prev = cur
	}
	require.NoError(t, prev.p.Close())
	require.Equal(t, 100, VerifyPLog(t, stores[0], part, acked))
}

// FencedLeaseExpired: once the local lease deadline has passed, Do
// refuses with ErrNotLeader before taking any number.
func FencedLeaseExpired(t *testing.T, st storage.Storage, part isequencer.PartitionID) {
	o := Options(st, part, plog.ModeFenced)
	var mu sync.Mutex
	deadline := time.Now().Add(time.Hour)
	o.LeaseDeadline = func() time.Time { mu.Lock(); defer mu.Unlock(); return deadline }
	a := openOwner(t, "A", o)
	_, err := a.do(t, WS(part, 1))
	require.NoError(t, err)
	mu.Lock()
	deadline = time.Now().Add(-time.Millisecond)
	mu.Unlock()
	_, err = a.do(t, WS(part, 1))
	require.ErrorIs(t, err, apppart.ErrNotLeader)
	// A command of a workspace not yet read, whose context ends while it
	// would wait for the read, is refused for the lease too: the answer
	// is known before the command waits for anything.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = a.p.Do(ctx, Cmd(WS(part, 99)))
	require.ErrorIs(t, err, apppart.ErrNotLeader, "a command begun after the deadline, with its context already ended")
	require.NoError(t, a.p.Close())
	require.Equal(t, 1, VerifyPLog(t, st, part, a.acked))
}

// FencedSplitGroup: a takeover lands between two chunks of one group
// write (payloads of 12 KiB, so that the writer's 32 KiB cap puts two
// events in a chunk). The commands of the chunk stored before the takeover
// succeed; the others fail as fenced; and the PLog holds exactly the
// acknowledged events of the deposed owner.
func FencedSplitGroup(t *testing.T, newStore func(t testing.TB) storage.Storage, part isequencer.PartitionID) {
	const (
		pad      = 12 << 10
		perChunk = 2
		queued   = 8
	)
	stA, stB := newStore(t), newStore(t)
	first, split := newPause(), newPause()
	entered := make(chan struct{}, 64)
	var mu sync.Mutex
	armSplit, calls := false, 0
	rec := &plogtest.Recorder{Storage: stA}
	rec.BeforeApplyBatchIf = func() {
		mu.Lock()
		hit := false
		if armSplit {
			if calls++; calls == 2 {
				armSplit, hit = false, true
			}
		}
		mu.Unlock()
		if hit {
			split.hit()
		}
	}
	oa := Options(stA, part, plog.ModeFenced)
	oa.AppStorage = rec
	oa.Hooks.AfterLeaseCheck = func() {
		select {
		case entered <- struct{}{}:
		default:
		}
	}
	oa.Hooks.BeforeGroupWrite = func(from, to isequencer.PLogOffset) {
		mu.Lock()
		if to-from+1 > perChunk && calls == 0 {
			armSplit = true
		}
		mu.Unlock()
		first.hit()
	}
	a := openOwner(t, "A", oa)
	a.pad = pad
	t.Cleanup(first.free)
	t.Cleanup(split.free)
	for i := range 3 {
		_, err := a.do(t, WS(part, 1+i))
		require.NoError(t, err)
	}

	// The committer pauses before writing one command's group while
	// queued more commands wait behind it: the next group holds at least
	// queued-1 of them (each command enters after the previous one has
	// queued its event).
	first.arm()
	type res struct {
		r   apppart.Result
		err error
	}
	results := make(chan res, queued+1)
	run := func(ws isequencer.WSID) {
		r, err := a.do(t, ws)
		results <- res{r, err}
	}
	go run(WS(part, 1))
	select {
	case <-first.reached:
	case <-time.After(time.Minute):
		t.Fatal("A's first group never reached its write")
	}
	for len(entered) > 0 {
		<-entered
	}
	for i := range queued {
		go run(WS(part, 2+i%3))
	}
	for range queued {
		select {
		case <-entered:
		case <-time.After(time.Minute):
			t.Fatal("A's commands never entered")
		}
	}
	split.arm()
	first.free()
	select {
	case <-split.reached:
	case <-time.After(time.Minute):
		t.Fatal("A's group write never reached its second chunk")
	}
	b := openOwner(t, "B", Options(stB, part, plog.ModeFenced))
	split.free()

	ok := 0
	for range queued + 1 {
		got := <-results
		if got.err == nil {
			ok++
			continue
		}
		require.ErrorIs(t, got.err, plog.ErrFenced)
	}
	// The command of the first group and the first chunk of the split one.
	require.Equal(t, 1+perChunk, ok, "commands acknowledged after the takeover")
	_, err := a.do(t, WS(part, 1))
	require.ErrorIs(t, err, apppart.ErrStopped)

	for i := range 5 {
		_, err := b.do(t, WS(part, 1+i))
		require.NoError(t, err)
	}
	require.NoError(t, a.p.Close())
	require.NoError(t, b.p.Close())
	all := append(a.acked, b.acked...)
	VerifyPLog(t, stB, part, all)
	// Nothing of A is stored that A did not acknowledge.
	ackedA := map[string]bool{}
	for _, x := range a.acked {
		ackedA[x.Payload] = true
	}
	r, err := plog.NewReader(stB, plog.ReaderOptions{})
	require.NoError(t, err)
	require.NoError(t, r.ReadEvents(context.Background(), part, 1, func(e *plog.Event) error {
		if p := string(e.Payload); strings.HasPrefix(p, "A-") && !ackedA[p] {
			return fmt.Errorf("offset %d holds A's event %.8s..., which A did not acknowledge", e.Offset, p)
		}
		return nil
	}))
}

// GroupedRecordConflict: trust level 0 writing in groups. A record is planted at the ID the next
// command of one workspace takes; that command and the commands of other
// workspaces share one group write. The planted record fails its command
// alone (plog.ErrConflict, the partition stops); the commands beside it in
// the group, and those of another partition running at the same time,
// succeed.
func GroupedRecordConflict(t *testing.T, st storage.Storage, part isequencer.PartitionID) {
	const workers = 7
	ctx := context.Background()
	first := newPause()
	entered := make(chan struct{}, 64)
	o := Options(st, part, plog.ModeTrust0)
	o.Hooks.AfterLeaseCheck = func() {
		select {
		case entered <- struct{}{}:
		default:
		}
	}
	o.Hooks.BeforeGroupWrite = func(_, _ isequencer.PLogOffset) { first.hit() }
	a := openOwner(t, "A", o)
	t.Cleanup(first.free)
	ob := Options(st, part+1, plog.ModeTrust0)
	b := openOwner(t, "B", ob)

	var next [workers + 2]isequencer.Number // next record ID per workspace
	for i := 1; i <= workers+1; i++ {
		r, err := a.do(t, WS(part, i))
		require.NoError(t, err)
		next[i] = r.Numbers[1] + 1
	}
	const victim = 3
	planted := []byte{0xEE}
	recKey, recCC := plog.RecordPKey(WS(part, victim), plog.RecordID(next[victim])), plog.RecordCCols(plog.RecordID(next[victim]))
	require.NoError(t, st.Put(ctx, recKey, recCC, planted))

	type res struct {
		ws  int
		err error
	}
	results := make(chan res, workers+2)
	run := func(ws int) {
		_, err := a.do(t, WS(part, ws))
		results <- res{ws, err}
	}
	// The committer holds a first command's group while the workers queue
	// behind it; a probe entering after them proves them queued.
	first.arm()
	go run(workers + 1)
	select {
	case <-first.reached:
	case <-time.After(time.Minute):
		t.Fatal("the first group never reached its write")
	}
	for len(entered) > 0 {
		<-entered
	}
	for ws := 1; ws <= workers; ws++ {
		go run(ws)
	}
	for range workers {
		<-entered
	}
	go run(workers + 1)
	<-entered
	var bErrs []error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 20 {
			if _, err := b.do(t, WS(part+1, 1+i%5)); err != nil {
				bErrs = append(bErrs, err)
			}
		}
	}()
	first.free()
	probes := 0
	for range workers + 2 {
		got := <-results
		switch {
		case got.ws == victim:
			require.ErrorIs(t, got.err, plog.ErrConflict)
			require.ErrorIs(t, got.err, apppart.ErrStopped)
		case got.ws == workers+1:
			// The first command, and the probe: in the group, or after it
			// in a partition that has stopped.
			if probes++; got.err != nil {
				require.ErrorIs(t, got.err, apppart.ErrStopped)
			}
		default:
			require.NoError(t, got.err, "WSID %d shares the group with the conflict, not the conflict", got.ws)
		}
	}
	wg.Wait()
	require.Empty(t, bErrs, "the other partition's commands")
	v, _, err := st.Get(ctx, recKey, recCC)
	require.NoError(t, err)
	require.Equal(t, planted, v, "not overwritten")
	require.NoError(t, a.p.Close())
	require.NoError(t, b.p.Close())
	VerifyPLog(t, st, part, a.acked)
	VerifyPLog(t, st, part+1, b.acked)
}
