package relay

import (
	"context"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// fuzzConn is a Conn without a socket, with one open subscription "s1",
// one negentropy session "n1" and one OK waiter, so every branch of
// handle has a receiver.
func fuzzConn(t *testing.T, log *zap.Logger, frames *[]string) (*Conn, *Subscription, chan NegReply, chan OKResult) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(context.Background())
	t.Cleanup(func() { cancel(nil) })
	c := &Conn{
		url: "ws://fuzz", log: log, ctx: ctx, cancel: cancel,
		subs: map[string]*Subscription{}, negs: map[string]chan NegReply{}, oks: map[string]okWaiters{},
	}
	c.opts.OnFrame = func(label string, _ int) { *frames = append(*frames, label) }
	sub := &Subscription{ID: "s1", conn: c, ch: make(chan SubMsg, 4), done: make(chan struct{})}
	c.subs["s1"] = sub
	neg := make(chan NegReply, 8)
	c.negs["n1"] = neg
	ok := make(chan OKResult, 1)
	c.oks[strings.Repeat("a", 64)] = okWaiters{id: strings.Repeat("a", 64), first: okWaiter{ch: ok}}
	return c, sub, neg, ok
}

// FuzzHandle: no relay frame panics the parser (handle recovers, but a
// recovered panic is still a bug: it is logged and fails here), a frame
// reaches a subscription only as what its label says, and events are
// delivered only to the subscription they name.
func FuzzHandle(f *testing.F) {
	ev := nostr.Event{Kind: 1, CreatedAt: 1, Content: "x", Tags: nostr.Tags{{"a", "b"}}}
	_ = ev.Sign("5c0c523f52a5b6fad39ed2403092df8cebc36318b39383bca6c00808626fab3a")
	evJSON, _ := nostr.EventEnvelope{SubscriptionID: ptr("s1"), Event: ev}.MarshalJSON()
	for _, s := range []string{
		string(evJSON),
		`["EVENT","s2",{"id":"00","kind":1}]`,
		`["EVENT","s1",{"id":` + strings.Repeat("[", 100) + `}]`,
		`["EOSE","s1"]`, `["EOSE"]`, `["CLOSED","s1","rate-limited: slow down"]`, `["CLOSED","s1"]`,
		`["NOTICE","hello"]`, `["NOTICE"]`, `["COUNT","s1",{"count":3}]`, `["COUNT","s1",{"count":-1.5}]`,
		`["OK","` + strings.Repeat("a", 64) + `",false,"duplicate: have it"]`, `["OK","x",true]`,
		`["AUTH","challenge"]`, `["AUTH",{"kind":22242}]`,
		`["NEG-MSG","n1","6101ffffffffffffffffff7f0000"]`, `["NEG-MSG","n1","abc"]`, `["NEG-MSG","n1","zz"]`,
		`["NEG-ERR","n1","blocked: too many"]`, `["NEG-ERROR","n1"]`, `["NEG-MSG","n2","61"]`,
		`[`, `]`, `""`, `["EVENT"`, `{"EVENT":1}`, "\xff\xfe", `["EVENT","s1",null]`, `["EVENT","s1",{"tags":[[null]]}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		core, logs := observer.New(zapcore.DebugLevel)
		var frames []string
		c, sub, neg, ok := fuzzConn(t, zap.New(core), &frames)
		c.handle(data)
		if logs.FilterMessage("panic while parsing relay message").Len() > 0 {
			t.Fatalf("parser panicked on %q: %v", data, logs.All()[0].ContextMap())
		}
		if len(frames) != 1 {
			t.Fatalf("OnFrame called %d times", len(frames))
		}
		label := frames[0]
		if label != frameLabel(string(data)) {
			t.Fatalf("label %q, frameLabel %q", label, frameLabel(string(data)))
		}
		select {
		case m, open := <-sub.ch:
			if !open {
				break
			}
			switch m.Type {
			case MsgEvent:
				if label != "EVENT" || m.Event == nil || m.Size != len(data) {
					t.Fatalf("event delivered from a %q frame: %+v", label, m)
				}
			case MsgEOSE:
				if label != "EOSE" {
					t.Fatalf("EOSE delivered from a %q frame", label)
				}
			case MsgClosed:
				if label != "CLOSED" {
					t.Fatalf("CLOSED delivered from a %q frame", label)
				}
			default:
				t.Fatalf("message type %d", m.Type)
			}
		default:
		}
		select {
		case r, open := <-neg:
			if open && !(label == "NEG-MSG" || label == "NEG-ERR" || label == "NEG-ERROR" || label == "NOTICE") {
				t.Fatalf("negentropy reply %+v from a %q frame", r, label)
			}
		default:
		}
		select {
		case <-ok:
			if label != "OK" {
				t.Fatalf("OK resolved by a %q frame", label)
			}
		default:
		}
		if c.Challenge() != "" && label != "AUTH" {
			t.Fatalf("challenge set by a %q frame", label)
		}
	})
}

func ptr(s string) *string { return &s }
