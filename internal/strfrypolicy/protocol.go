package strfrypolicy

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/nbd-wtf/go-nostr"
)

// Request types strfry sends. "new" asks for a decision; "lookback" (strfry
// before 0.9.5, with writePolicy.lookbackSeconds) replays a stored event at
// the plugin's start and expects no answer.
const (
	TypeNew      = "new"
	TypeLookback = "lookback"
)

// Request is one line strfry writes to the plugin's standard input. Only
// type and event are read; sourceType (IP4, IP6, Import, Stream, Sync,
// Stored) and sourceInfo change nothing: an event is accepted for what it
// is, however it came. Unknown fields are ignored.
type Request struct {
	Type       string          `json:"type"`
	Event      json.RawMessage `json:"event"`
	ReceivedAt json.RawMessage `json:"receivedAt,omitempty"`
	SourceType string          `json:"sourceType,omitempty"`
	SourceInfo json.RawMessage `json:"sourceInfo,omitempty"`
}

// Answer is one line the plugin writes to its standard output: the event's
// id, the action and, for a rejection, the NIP-01 message strfry sends the
// client in its OK.
type Answer struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	Msg    string `json:"msg,omitempty"`
}

// parsed is a request line read: the event when it decoded, its id as far
// as it could be found, and what was wrong with the line.
type parsed struct {
	typ string
	ev  *nostr.Event
	id  string
	err error
}

// idRE finds an event id in a line that is not JSON: a top-level "id" key
// (inside content it would be escaped as \"id\").
var idRE = regexp.MustCompile(`"id"\s*:\s*"([0-9a-f]{64})"`)

// parseLine reads one request line. A line that is not a request, or whose
// event does not decode, has err set, and id when one could be found.
func parseLine(line []byte) parsed {
	var req Request
	if err := json.Unmarshal(line, &req); err != nil {
		p := parsed{err: fmt.Errorf("request is not JSON: %w", err)}
		if m := idRE.FindSubmatch(line); m != nil {
			p.id = string(m[1])
		}
		return p
	}
	p := parsed{typ: req.Type}
	if len(req.Event) == 0 || string(req.Event) == "null" {
		p.err = fmt.Errorf("request without an event")
		return p
	}
	var w wireEvent
	if err := json.Unmarshal(req.Event, &w); err != nil {
		// A field of the wrong type: encoding/json still fills the others.
		p.id = w.ID
		p.err = fmt.Errorf("event does not decode: %w", err)
		return p
	}
	ev := w.event()
	p.ev, p.id = &ev, ev.ID
	if ev.ID == "" {
		p.err = fmt.Errorf("event without an id")
	}
	return p
}

// wireEvent is an event as JSON carries it, decoded with encoding/json:
// fields it does not know are ignored (go-nostr's decoder refuses some).
type wireEvent struct {
	ID        string     `json:"id"`
	PubKey    string     `json:"pubkey"`
	CreatedAt int64      `json:"created_at"`
	Kind      int        `json:"kind"`
	Tags      [][]string `json:"tags"`
	Content   string     `json:"content"`
	Sig       string     `json:"sig"`
}

func (w *wireEvent) event() nostr.Event {
	tags := make(nostr.Tags, len(w.Tags))
	for i, t := range w.Tags {
		tags[i] = nostr.Tag(t)
	}
	return nostr.Event{ID: w.ID, PubKey: w.PubKey, CreatedAt: nostr.Timestamp(w.CreatedAt),
		Kind: w.Kind, Tags: tags, Content: w.Content, Sig: w.Sig}
}
