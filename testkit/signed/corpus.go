package signed

import (
	"bufio"
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/nbd-wtf/go-nostr"
)

// CorpusSize is the number of events in Corpus.
const CorpusSize = 1200

// CorpusBase is the created_at of Corpus()[0]; event i has CorpusBase+i.
const CorpusBase = nostr.Timestamp(1_600_000_000)

//go:embed testdata/corpus.jsonl.gz
var corpusData []byte

var corpusEvents = sync.OnceValues(func() ([]*nostr.Event, error) {
	zr, err := gzip.NewReader(bytes.NewReader(corpusData))
	if err != nil {
		return nil, fmt.Errorf("harness: corpus: %w", err)
	}
	var evs []*nostr.Event
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		ev := &nostr.Event{}
		if err := json.Unmarshal(sc.Bytes(), ev); err != nil {
			return nil, fmt.Errorf("harness: corpus: %w", err)
		}
		evs = append(evs, ev)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("harness: corpus: %w", err)
	}
	return evs, nil
})

// Corpus returns CorpusSize pre-signed kind 1 notes by KeyFromSeed("corpus"),
// oldest first, as CorpusNote builds them. Signing is slow under -race; use
// the corpus when a test needs many real signed events and does not care
// which. Each call returns fresh copies.
func Corpus() []*nostr.Event {
	evs, err := corpusEvents()
	if err != nil {
		panic(err.Error())
	}
	out := make([]*nostr.Event, len(evs))
	for i, ev := range evs {
		cp := *ev
		out[i] = &cp
	}
	return out
}

// CorpusNote builds (unsigned unless sign) corpus event i.
func CorpusNote(i int, sign bool) *nostr.Event {
	k := corpusKey()
	opts := []Option{WithCreatedAt(CorpusBase + nostr.Timestamp(i)), WithContent(fmt.Sprintf("corpus note %d", i))}
	if !sign {
		opts = append(opts, unsigned)
	}
	return k.build(KindReply, "", nostr.Tags{}, opts)
}

var corpusKey = sync.OnceValue(func() *Key { return KeyFromSeed("corpus") })

// WriteCorpus writes the corpus file (gzipped JSON lines) to w, signing
// every event; the harness tests regenerate testdata/corpus.jsonl.gz with it.
func WriteCorpus(w io.Writer) error {
	evs := make([]*nostr.Event, CorpusSize)
	for i := range evs {
		evs[i] = CorpusNote(i, false)
	}
	SignAll([]*Key{corpusKey()}, evs)
	zw := gzip.NewWriter(w)
	for _, ev := range evs {
		line, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("harness: corpus: %w", err)
		}
		if _, err := zw.Write(append(line, '\n')); err != nil {
			return fmt.Errorf("harness: corpus: %w", err)
		}
	}
	return zw.Close()
}
