package relay

import (
	"io"
	"sync"

	"github.com/mailru/easyjson/jwriter"
	"github.com/nbd-wtf/go-nostr"
)

// filterJSON is a filter's JSON as Filter.MarshalJSON writes it, held in
// a pooled buffer (and the encoder's own chunks past it) instead of built
// into a slice of its own: every filter of every REQ and NEG-OPEN is
// measured before it is sent, and building each one's JSON for that was a
// tenth of the large profile's allocations.
type filterJSON struct {
	w    jwriter.Writer
	p    *[]byte
	ours bool // the JSON fitted the pooled buffer
}

// filterJSONBufs are filterJSON's buffers: a Layer 3 filter of 100 ids is
// about 7 kB.
var filterJSONBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// encode writes f's JSON into j (a zero filterJSON, kept on the caller's
// stack).
func (j *filterJSON) encode(f nostr.Filter) {
	j.w.NoEscapeHTML = true
	j.p = filterJSONBufs.Get().(*[]byte)
	j.w.Buffer.Buf = (*j.p)[:0]
	f.MarshalEasyJSON(&j.w)
	j.ours = len(j.w.Buffer.Buf) == j.w.Buffer.Size() && cap(j.w.Buffer.Buf) == cap(*j.p)
}

// size is the JSON's length.
func (j *filterJSON) size() int { return j.w.Buffer.Size() }

// release appends the JSON to dst (nil: nowhere) and gives the buffers
// back: the pooled one to the pool when the JSON fitted it, the encoder's
// chunks (with the pooled buffer, when it overflowed) to the encoder's
// pool.
func (j *filterJSON) release(dst *appender) {
	if !j.ours {
		var w io.Writer = io.Discard
		if dst != nil {
			w = dst
		}
		_, _ = j.w.Buffer.DumpTo(w)
		return
	}
	if dst != nil {
		*dst = append(*dst, j.w.Buffer.Buf...)
	}
	filterJSONBufs.Put(j.p)
}

// FilterJSONSize is the length of f's JSON as Filter.MarshalJSON writes
// it, measured without building it.
func FilterJSONSize(f nostr.Filter) (int, error) {
	var j filterJSON
	j.encode(f)
	n, err := j.size(), j.w.Error
	j.release(nil)
	return n, err
}

// appender is an io.Writer appending to itself.
type appender []byte

func (a *appender) Write(p []byte) (int, error) {
	*a = append(*a, p...)
	return len(p), nil
}
