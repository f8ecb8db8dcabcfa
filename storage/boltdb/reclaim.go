package boltdb

import (
	"bytes"
	"context"
	"time"

	bolt "go.etcd.io/bbolt"
)

// reclaimChunk bounds the expiry index entries one reclaim transaction
// handles, so that the sweeper never holds the write lock for long.
const reclaimChunk = 1000

// sweep calls Reclaim on every tick until ctx is done. Failures go to the
// logger; the next tick tries again.
func (s *Store) sweep(ctx context.Context, tick <-chan time.Time, stopTicker func(), swept chan<- int) {
	defer close(s.done)
	defer stopTicker()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
		n, err := s.Reclaim(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.log.Warn("boltdb: reclaiming expired rows failed", "path", s.path, "err", err)
		case n > 0:
			s.log.Debug("boltdb: reclaimed expired rows", "path", s.path, "rows", n)
		}
		if swept != nil {
			select {
			case swept <- n:
			case <-ctx.Done():
				return
			}
		}
	}
}

// Reclaim deletes the rows whose TTL has passed and returns how many it
// deleted. The sweeper calls it every Options.ReclaimInterval; call it to
// reclaim now. It works in write transactions of at most 1,000 expiry index
// entries, checking ctx before each, and writes nothing when no entry is
// due.
func (s *Store) Reclaim(ctx context.Context) (int, error) {
	total := 0
	for {
		due := false
		err := s.view(ctx, func(rows *bolt.Bucket, now int64) error {
			k, _ := rows.Tx().Bucket(bucketExpiry).Cursor().First()
			exp, _, ok := splitExpiryKey(k)
			due = k != nil && (!ok || exp <= now)
			return nil
		})
		if err != nil || !due {
			return total, err
		}
		seen, n := 0, 0
		err = s.update(ctx, false, func(w *writer) error {
			n = 0
			var keys [][]byte
			c := w.expiry.Cursor()
			for k, _ := c.First(); k != nil && len(keys) < reclaimChunk; k, _ = c.Next() {
				if exp, _, ok := splitExpiryKey(k); ok && exp > w.now {
					break
				}
				keys = append(keys, bytes.Clone(k))
			}
			seen = len(keys)
			for _, k := range keys {
				if exp, rk, ok := splitExpiryKey(k); ok {
					if v := w.rows.Get(rk); v != nil {
						if _, e, err := decodeValue(v); err == nil && e == exp {
							if err := w.rows.Delete(rk); err != nil {
								return err
							}
							n++
						}
					}
				}
				if err := w.expiry.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += n
		if seen < reclaimChunk {
			return total, nil
		}
	}
}
