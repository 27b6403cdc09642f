package statestore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// bbolt's on-disk meta page (go.etcd.io/bbolt v1.4): a 16-byte page
// header, then magic, version, page size, flags (uint32 each), the root
// bucket (root page, sequence), the freelist page, the high-water page id,
// the transaction id and an FNV-64a checksum of the preceding 56 bytes,
// in the machine's byte order (little-endian on every platform we ship).
const (
	boltMagic       = 0xED0CDAED
	boltVersion     = 2
	boltPageHeader  = 16
	boltMetaSize    = 64
	boltNoFreelist  = ^uint64(0)
	boltMinPageSize = 1024
)

type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

func parseMeta(b []byte) (boltMeta, bool) {
	if len(b) < boltMetaSize {
		return boltMeta{}, false
	}
	le := binary.LittleEndian
	if le.Uint32(b[0:]) != boltMagic || le.Uint32(b[4:]) != boltVersion {
		return boltMeta{}, false
	}
	h := fnv.New64a()
	h.Write(b[:56])
	if h.Sum64() != le.Uint64(b[56:]) {
		return boltMeta{}, false
	}
	m := boltMeta{pageSize: le.Uint32(b[8:]), root: le.Uint64(b[16:]), freelist: le.Uint64(b[32:]), pgid: le.Uint64(b[40:]), txid: le.Uint64(b[48:])}
	if m.pageSize < boltMinPageSize || m.pageSize&(m.pageSize-1) != 0 {
		return boltMeta{}, false
	}
	return m, true
}

// precheck reads the store file's two meta pages before bbolt maps it: a
// file with no valid meta page, or shorter than the pages its newest meta
// page says it has (a truncated copy), would make bbolt fail or fault on
// first access. It returns why the file cannot be used.
func precheck(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	read := func(off int64) (boltMeta, bool) {
		buf := make([]byte, boltPageHeader+boltMetaSize)
		if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
			return boltMeta{}, false
		}
		return parseMeta(buf[boltPageHeader:])
	}
	var best boltMeta
	found := false
	m0, ok0 := read(0)
	candidates := []int64{4096, 8192, 16384, 32768, 65536}
	if ok0 {
		best, found = m0, true
		candidates = []int64{int64(m0.pageSize)}
	}
	for _, off := range candidates {
		if m1, ok := read(off); ok && int64(m1.pageSize) == off {
			if !found || m1.txid > best.txid {
				best, found = m1, true
			}
			break
		}
	}
	if !found {
		return fmt.Errorf("no valid bbolt meta page in %s (%d bytes)", path, fi.Size())
	}
	need := int64(best.pgid) * int64(best.pageSize)
	if fi.Size() < need {
		return fmt.Errorf("truncated: %d bytes, its meta page says %d pages of %d bytes (%d)", fi.Size(), best.pgid, best.pageSize, need)
	}
	if best.root >= best.pgid || (best.freelist != boltNoFreelist && best.freelist >= best.pgid) {
		return fmt.Errorf("meta page points past the end of the data (root %d, freelist %d, pages %d)", best.root, best.freelist, best.pgid)
	}
	return nil
}
