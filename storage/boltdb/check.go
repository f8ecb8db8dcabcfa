package boltdb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
)

// bbolt's on-disk format (go.etcd.io/bbolt/internal/common), read here
// with bounds checks before bbolt maps the file: bbolt trusts the page
// ids, counts and offsets it finds, and one that points past the file
// faults the process (a SIGSEGV or SIGBUS that no recover can catch).
// Integers are in the machine's byte order, as bbolt writes them.
const (
	boltMagic   = 0xED0CDAED
	boltVersion = 2

	pageHeaderSize  = 16 // id u64, flags u16, count u16, overflow u32
	metaSize        = 64 // magic, version, pageSize, flags u32; root, sequence, freelist, pgid, txid, checksum u64
	metaSumSize     = 56 // the bytes the checksum covers
	elementSize     = 16 // branch: pos, ksize u32, pgid u64; leaf: flags, pos, ksize, vsize u32
	bucketHeaderLen = 16 // root u64, sequence u64

	branchPage    = 0x01
	leafPage      = 0x02
	freelistPage  = 0x10
	bucketLeaf    = 0x01
	noFreelist    = ^uint64(0)
	minPageSize   = 512
	maxPageSize   = 1 << 16
	freelistLarge = 0xFFFF // a freelist page count meaning "the count is the first id"
)

var ne = binary.NativeEndian

// boltMeta is the part of a meta page the check uses.
type boltMeta struct {
	pageSize uint64 // the page size bbolt uses, not the meta's field
	root     uint64
	freelist uint64
	pgid     uint64 // the high-water mark: pages 0..pgid-1 exist
	txid     uint64
}

// parseMeta decodes and validates the meta page at b (its page header
// first), as bbolt's Meta.Validate does.
func parseMeta(b []byte) (boltMeta, error) {
	if len(b) < pageHeaderSize+metaSize {
		return boltMeta{}, errors.New("short meta page")
	}
	m := b[pageHeaderSize : pageHeaderSize+metaSize]
	switch {
	case ne.Uint32(m[0:]) != boltMagic:
		return boltMeta{}, errors.New("not a bbolt meta page (bad magic)")
	case ne.Uint32(m[4:]) != boltVersion:
		return boltMeta{}, fmt.Errorf("bbolt format version %d, want %d", ne.Uint32(m[4:]), boltVersion)
	}
	h := fnv.New64a()
	_, _ = h.Write(m[:metaSumSize])
	if h.Sum64() != ne.Uint64(m[metaSumSize:]) {
		return boltMeta{}, errors.New("meta page checksum mismatch")
	}
	return boltMeta{
		root:     ne.Uint64(m[16:]),
		freelist: ne.Uint64(m[32:]),
		pgid:     ne.Uint64(m[40:]),
		txid:     ne.Uint64(m[48:]),
	}, nil
}

// fileChecker walks a bbolt file's pages through ReadAt.
type fileChecker struct {
	r        io.ReaderAt
	size     int64
	m        boltMeta
	reached  map[uint64]bool // pages reachable from the root
	freeList []uint64
}

// checkFile checks the structure of the bbolt file of size bytes behind r
// the way bbolt will read it with page size pageSize (the one bbolt
// found): the meta page bbolt picks (the valid one with the higher
// transaction ID), a size that is a whole number of pages
// and covers the meta page's high-water page id, the freelist page, and
// every branch, leaf and bucket page reachable from the root, with every
// page id, element and key/value range inside the file. A page reached
// twice, or both reachable and free, is corrupt too. It reads each
// reachable page once. The error says what is wrong; data inside keys and
// values is not judged (the driver's row decoding does that).
func checkFile(r io.ReaderAt, size int64, pageSize int) error {
	ps := int64(pageSize)
	if ps < minPageSize || ps > maxPageSize || ps&(ps-1) != 0 {
		return fmt.Errorf("page size %d is not a power of two in [%d, %d]", ps, minPageSize, maxPageSize)
	}
	c := &fileChecker{r: r, size: size, reached: map[uint64]bool{}, m: boltMeta{pageSize: uint64(ps)}}
	if err := c.pickMeta(); err != nil {
		return err
	}
	switch {
	case size%ps != 0:
		return fmt.Errorf("size %d is not a whole number of %d-byte pages (truncated?)", size, ps)
	case c.m.pgid < 4 || uint64(size/ps) < c.m.pgid:
		return fmt.Errorf("size %d holds %d pages, the meta page's high-water mark is page %d (truncated?)", size, size/ps, c.m.pgid)
	}
	if err := c.readFreelist(); err != nil {
		return err
	}
	if err := c.walk(c.m.root, 0); err != nil {
		return fmt.Errorf("root bucket: %w", err)
	}
	for _, id := range c.freeList {
		if c.reached[id] {
			return fmt.Errorf("page %d is both free and in use", id)
		}
	}
	return nil
}

// pickMeta finds the meta page bbolt uses: of the two at page 0 and page
// 1, the valid one with the higher transaction ID.
func (c *fileChecker) pickMeta() error {
	m0, err0 := c.readMeta(0)
	m1, err1 := c.readMeta(int64(c.m.pageSize))
	switch {
	case err0 != nil && err1 != nil:
		return fmt.Errorf("meta page 0: %w; meta page 1: %w", err0, err1)
	case err0 != nil || (err1 == nil && m1.txid > m0.txid):
		m1.pageSize = c.m.pageSize
		c.m = m1
	default:
		m0.pageSize = c.m.pageSize
		c.m = m0
	}
	return nil
}

func (c *fileChecker) readMeta(off int64) (boltMeta, error) {
	b := make([]byte, pageHeaderSize+metaSize)
	if off+int64(len(b)) > c.size {
		return boltMeta{}, errors.New("beyond the end of the file")
	}
	if _, err := c.r.ReadAt(b, off); err != nil {
		return boltMeta{}, err
	}
	return parseMeta(b)
}

// readPage reads page id with its overflow pages, checked to lie below
// the high-water mark.
func (c *fileChecker) readPage(id uint64) ([]byte, error) {
	if id < 2 || id >= c.m.pgid {
		return nil, fmt.Errorf("page id %d outside 2..%d", id, c.m.pgid-1)
	}
	ps := c.m.pageSize
	b := make([]byte, ps)
	if _, err := c.r.ReadAt(b, int64(id*ps)); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	overflow := uint64(ne.Uint32(b[12:]))
	if overflow >= c.m.pgid-id {
		return nil, fmt.Errorf("page %d: %d overflow pages run past the high-water mark %d", id, overflow, c.m.pgid)
	}
	if overflow > 0 {
		b = append(b, make([]byte, overflow*ps)...)
		if _, err := c.r.ReadAt(b[ps:], int64((id+1)*ps)); err != nil {
			return nil, fmt.Errorf("page %d: %w", id, err)
		}
	}
	return b, nil
}

// readFreelist checks the freelist page and keeps its page ids.
func (c *fileChecker) readFreelist() error {
	if c.m.freelist == noFreelist {
		return nil // bbolt rebuilds the list by walking the tree, which walk checks
	}
	b, err := c.readPage(c.m.freelist)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	if got := ne.Uint64(b); got != c.m.freelist {
		return fmt.Errorf("freelist: page %d says it is page %d", c.m.freelist, got)
	}
	if f := ne.Uint16(b[8:]); f != freelistPage {
		return fmt.Errorf("freelist: page %d has flags 0x%02x, want 0x%02x", c.m.freelist, f, freelistPage)
	}
	count, at := uint64(ne.Uint16(b[10:])), uint64(pageHeaderSize)
	if count == freelistLarge {
		if len(b) < pageHeaderSize+8 {
			return errors.New("freelist: short page")
		}
		count, at = ne.Uint64(b[pageHeaderSize:]), pageHeaderSize+8
	}
	if count > (uint64(len(b))-at)/8 {
		return fmt.Errorf("freelist: %d page ids do not fit its %d bytes", count, len(b))
	}
	c.freeList = make([]uint64, count)
	seen := make(map[uint64]bool, count)
	for i := range c.freeList {
		id := ne.Uint64(b[at+uint64(i)*8:])
		switch {
		case id < 2 || id >= c.m.pgid:
			return fmt.Errorf("freelist: free page id %d outside 2..%d", id, c.m.pgid-1)
		case seen[id]:
			return fmt.Errorf("freelist: page %d is listed twice", id)
		}
		seen[id] = true
		c.freeList[i] = id
	}
	for id := c.m.freelist; id <= c.m.freelist+uint64(ne.Uint32(b[12:])); id++ {
		c.reached[id] = true
	}
	return nil
}

// walk checks the page tree rooted at page id.
func (c *fileChecker) walk(id uint64, depth int) error {
	if depth > 64 {
		return fmt.Errorf("page %d: tree deeper than 64 levels", id)
	}
	b, err := c.readPage(id)
	if err != nil {
		return err
	}
	for i := id; i < id+uint64(len(b))/c.m.pageSize; i++ {
		if c.reached[i] {
			return fmt.Errorf("page %d is reached twice", i)
		}
		c.reached[i] = true
	}
	if got := ne.Uint64(b); got != id {
		return fmt.Errorf("page %d says it is page %d", id, got)
	}
	return c.checkNode(b, id, depth)
}

// checkNode checks the branch or leaf page in b (a page read from the file
// or an inline bucket's page) and walks on to its children.
func (c *fileChecker) checkNode(b []byte, id uint64, depth int) error {
	if len(b) < pageHeaderSize {
		return fmt.Errorf("page %d: %d bytes, shorter than a page header", id, len(b))
	}
	flags, count := ne.Uint16(b[8:]), int(ne.Uint16(b[10:]))
	if pageHeaderSize+count*elementSize > len(b) {
		return fmt.Errorf("page %d: %d elements do not fit its %d bytes", id, count, len(b))
	}
	switch flags {
	case branchPage:
		if count == 0 {
			return fmt.Errorf("page %d: a branch page without elements", id)
		}
		for i := range count {
			e := pageHeaderSize + i*elementSize
			if err := inPage(b, e, ne.Uint32(b[e:]), ne.Uint32(b[e+4:]), 0); err != nil {
				return fmt.Errorf("page %d element %d: %w", id, i, err)
			}
			if err := c.walk(ne.Uint64(b[e+8:]), depth+1); err != nil {
				return err
			}
		}
	case leafPage:
		for i := range count {
			e := pageHeaderSize + i*elementSize
			eflags, pos, ksize, vsize := ne.Uint32(b[e:]), ne.Uint32(b[e+4:]), ne.Uint32(b[e+8:]), ne.Uint32(b[e+12:])
			if err := inPage(b, e, pos, ksize, vsize); err != nil {
				return fmt.Errorf("page %d element %d: %w", id, i, err)
			}
			if eflags&bucketLeaf == 0 {
				continue
			}
			v := b[uint64(e)+uint64(pos)+uint64(ksize):][:vsize]
			if len(v) < bucketHeaderLen {
				return fmt.Errorf("page %d element %d: a bucket value of %d bytes", id, i, len(v))
			}
			if root := ne.Uint64(v); root != 0 {
				if err := c.walk(root, depth+1); err != nil {
					return err
				}
				continue
			}
			if err := c.checkNode(v[bucketHeaderLen:], id, depth+1); err != nil { // an inline bucket
				return fmt.Errorf("inline bucket: %w", err)
			}
		}
	default:
		return fmt.Errorf("page %d: flags 0x%02x, want a branch or leaf page", id, flags)
	}
	return nil
}

// inPage checks that an element at offset e whose key (and value) start
// pos bytes after it lies inside b.
func inPage(b []byte, e int, pos, ksize, vsize uint32) error {
	if end := uint64(e) + uint64(pos) + uint64(ksize) + uint64(vsize); end > uint64(len(b)) {
		return fmt.Errorf("key and value end at byte %d of a %d-byte page", end, len(b))
	}
	return nil
}
