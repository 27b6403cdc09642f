// Package enginecompare measures the two embedded stores the sidecar could
// use for its state (bbolt and Pebble) on the state's shape: LocalIndex-sized
// records (32-byte id key, 24-byte value) written in batches of 1,000 per
// committed transaction, then the store reopened and scanned. It is its own
// module so the product's go.mod does not carry Pebble.
package enginecompare

import (
	"crypto/rand"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble"
	bolt "go.etcd.io/bbolt"
)

const (
	records = 20_000
	batch   = 1_000
)

func makeRecords() (keys, vals [][]byte) {
	for i := 0; i < records; i++ {
		k := make([]byte, 32)
		rand.Read(k)
		v := make([]byte, 24)
		rand.Read(v[:8])
		keys, vals = append(keys, k), append(vals, v)
	}
	return
}

func dirBytes(b *testing.B, dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func writeBolt(b *testing.B, dir string, keys, vals [][]byte) {
	db, err := bolt.Open(filepath.Join(dir, "state.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(keys); i += batch {
		err := db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte("local"))
			if err != nil {
				return err
			}
			for j := i; j < i+batch; j++ {
				if err := bk.Put(keys[j], vals[j]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	db.Close()
}

func scanBolt(b *testing.B, dir string) int {
	db, err := bolt.Open(filepath.Join(dir, "state.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	n := 0
	db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("local")).ForEach(func(k, v []byte) error { n++; return nil })
	})
	return n
}

func writePebble(b *testing.B, dir string, keys, vals [][]byte) {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quiet{}})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(keys); i += batch {
		bt := db.NewBatch()
		for j := i; j < i+batch; j++ {
			bt.Set(keys[j], vals[j], nil)
		}
		if err := bt.Commit(pebble.Sync); err != nil {
			b.Fatal(err)
		}
	}
	db.Close()
}

func scanPebble(b *testing.B, dir string) int {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quiet{}})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	it, _ := db.NewIter(nil)
	n := 0
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	it.Close()
	return n
}

type engine struct {
	name  string
	write func(*testing.B, string, [][]byte, [][]byte)
	scan  func(*testing.B, string) int
}

var engines = []engine{{"bbolt", writeBolt, scanBolt}, {"pebble", writePebble, scanPebble}, {"bbolt-chunked", writeBoltChunked, scanBoltChunked}}

// writeBoltChunked is the layout the sidecar uses: each batch is one value
// (the records packed back to back) under an increasing sequence key, so
// pages fill completely and nothing splits.
func writeBoltChunked(b *testing.B, dir string, keys, vals [][]byte) {
	db, err := bolt.Open(filepath.Join(dir, "state.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(keys); i += batch {
		err := db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte("local"))
			if err != nil {
				return err
			}
			bk.FillPercent = 1
			chunk := make([]byte, 0, batch*56)
			for j := i; j < i+batch; j++ {
				chunk = append(append(chunk, keys[j]...), vals[j]...)
			}
			seq, _ := bk.NextSequence()
			return bk.Put(binary.BigEndian.AppendUint64(nil, seq), chunk)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	db.Close()
}

func scanBoltChunked(b *testing.B, dir string) int {
	db, err := bolt.Open(filepath.Join(dir, "state.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	n := 0
	db.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("local")).ForEach(func(k, v []byte) error { n += len(v) / 56; return nil })
	})
	return n
}

// BenchmarkWrite: 20,000 records in 20 synced batches into a fresh store;
// disk-B/record is the directory's size after close.
func BenchmarkWrite(b *testing.B) {
	keys, vals := makeRecords()
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			var size int64
			for i := 0; i < b.N; i++ {
				dir := b.TempDir()
				e.write(b, dir, keys, vals)
				b.StopTimer()
				size = dirBytes(b, dir)
				os.RemoveAll(dir)
				b.StartTimer()
			}
			b.ReportMetric(float64(size)/records, "disk-B/record")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/records, "ns/record")
		})
	}
}

// BenchmarkOpenScan: open a store of 20,000 records and read them all.
func BenchmarkOpenScan(b *testing.B) {
	keys, vals := makeRecords()
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			dir := b.TempDir()
			e.write(b, dir, keys, vals)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if n := e.scan(b, dir); n != records {
					b.Fatalf("scanned %d records, want %d", n, records)
				}
			}
		})
	}
}

type quiet struct{}

func (quiet) Infof(string, ...interface{})      {}
func (quiet) Errorf(string, ...interface{})     {}
func (quiet) Fatalf(f string, a ...interface{}) { panic(f) }
