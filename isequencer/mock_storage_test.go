package isequencer

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
)

var errStorage = errors.New("mock storage: injected failure")

// mockStorage is an in-memory ISeqStorage with a PLog, failure switches and
// a blocking hook. Safe for concurrent use.
type mockStorage struct {
	mu         sync.Mutex
	numbers    map[NumberKey]Number
	nextOffset PLogOffset
	plog       map[PLogOffset][]SeqValue

	reads, writes, actualizations int
	readIDs                       [][]SeqID
	eventsReplayed                int

	failRead, failWrite, failReadOffset, failActualize error
	// block, if non-nil, makes ActualizeSequencesFromPLog wait for it to be
	// closed (or for ctx).
	block chan struct{}
	// actualizeStarted, if non-nil, receives one value per actualization.
	actualizeStarted chan struct{}
}

func newMockStorage() *mockStorage {
	return &mockStorage{numbers: map[NumberKey]Number{}, plog: map[PLogOffset][]SeqValue{}}
}

func (m *mockStorage) ReadNumbers(ws WSID, ids []SeqID) ([]Number, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reads++
	m.readIDs = append(m.readIDs, slices.Clone(ids))
	if m.failRead != nil {
		return nil, m.failRead
	}
	out := make([]Number, len(ids))
	for i, id := range ids {
		out[i] = m.numbers[NumberKey{WSID: ws, SeqID: id}]
	}
	return out, nil
}

func (m *mockStorage) ReadNextPLogOffset() (PLogOffset, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failReadOffset != nil {
		return 0, m.failReadOffset
	}
	return m.nextOffset, nil
}

func (m *mockStorage) WriteValuesAndNextPLogOffset(batch []SeqValue, next PLogOffset) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failWrite != nil {
		return m.failWrite
	}
	m.writes++
	seen := map[NumberKey]bool{}
	for _, v := range batch {
		if seen[v.Key] {
			panic("mockStorage: duplicate key in batch")
		}
		seen[v.Key] = true
		m.numbers[v.Key] = v.Value
	}
	m.nextOffset = next
	return nil
}

func (m *mockStorage) ActualizeSequencesFromPLog(ctx context.Context, from PLogOffset, batcher func([]SeqValue, PLogOffset) error) error {
	m.mu.Lock()
	m.actualizations++
	started, block, fail := m.actualizeStarted, m.block, m.failActualize
	var offsets []PLogOffset
	for o := range m.plog {
		if o >= from {
			offsets = append(offsets, o)
		}
	}
	slices.Sort(offsets)
	events := make([][]SeqValue, len(offsets))
	for i, o := range offsets {
		events[i] = slices.Clone(m.plog[o])
	}
	m.mu.Unlock()
	if started != nil {
		started <- struct{}{}
	}
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail != nil {
		return fail
	}
	for i, o := range offsets {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := batcher(events[i], o); err != nil {
			return err
		}
		m.mu.Lock()
		m.eventsReplayed++
		m.mu.Unlock()
	}
	return nil
}

// writeEvent records an event at offset, as a command processor does
// between Next and Flush. It reports false if the offset is taken.
func (m *mockStorage) writeEvent(offset PLogOffset, vals []SeqValue) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.plog[offset]; ok {
		return false
	}
	m.plog[offset] = slices.Clone(vals)
	return true
}

func (m *mockStorage) set(f func(m *mockStorage)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	f(m)
}

func (m *mockStorage) stored() (map[NumberKey]Number, PLogOffset) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.numbers), m.nextOffset
}
