package mem

import "github.com/cqlseq/cqlseq/storage"

// Backup is a Store's rows as of the instant Store.Backup took them, as a
// keyspace snapshot holds them: values, expiry times and versions (a CQL
// backup keeps each cell's write timestamp).
type Backup struct {
	parts map[string]map[string]row
}

// Backup returns a copy of every row now stored. It fails only on a closed
// Store (storage.ErrClosed).
func (s *Store) Backup() (*Backup, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return nil, storage.ErrClosed
	}
	b := &Backup{parts: make(map[string]map[string]row, len(s.mu.parts))}
	for pk, p := range s.mu.parts {
		rows := make(map[string]row, len(p.rows))
		for cc, r := range p.rows {
			rows[cc] = *r // values are never written in place: a row is replaced whole
		}
		b.parts[pk] = rows
	}
	return b, nil
}

// Restore replaces every row of the Store by b's, as restoring a keyspace
// from a snapshot does: rows written after the backup are gone, and the
// backup's rows come back with their versions. A write that lands later
// is ordered against them by version, as on any store. It fails only on a
// closed Store.
func (s *Store) Restore(b *Backup) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mu.closed {
		return storage.ErrClosed
	}
	s.mu.parts = make(map[string]*partition, len(b.parts))
	for pk, rows := range b.parts {
		p := &partition{rows: make(map[string]*row, len(rows))}
		for cc, r := range rows {
			r := r
			p.rows[cc] = &r
		}
		s.mu.parts[pk] = p
	}
	return nil
}
