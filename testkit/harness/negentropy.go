package harness

import (
	"context"
	"time"

	"github.com/nbd-wtf/go-nostr/nip77"
	"github.com/nbd-wtf/go-nostr/nip77/negentropy"
	"github.com/nbd-wtf/go-nostr/nip77/negentropy/storage/vector"
)

// NIP-77 is served by the proxy rather than by khatru: khatru v0.19.1
// answers NEG-OPEN before it stores the session (each message runs in its
// own goroutine), so a fast client's first NEG-MSG often gets
// ["NEG-ERROR", id, "CLOSED"]. The proxy handles NEG-* messages of one
// connection in order with the same go-nostr negentropy code and frame limit
// khatru uses, on the relay's uncapped store.

// negFrameLimit is khatru's negentropy frame size limit.
const negFrameLimit = 1024 * 1024

// DefaultNegIdleTimeout is how long an idle negentropy session lives, as in
// khatru.
const DefaultNegIdleTimeout = 7 * time.Second

// NEG-ERR reasons the relay sends.
const (
	NegErrTooMany = "blocked: too many query results"
	NegErrClosed  = "closed: unknown or expired negentropy session"
)

type negSession struct {
	neg      *negentropy.Negentropy
	lastUsed time.Time
}

func (c *proxyConn) negError(ctx context.Context, sub, reason string) {
	c.sendJSON(ctx, []any{"NEG-ERR", sub, reason})
}

// negentropy handles one NEG-OPEN, NEG-MSG or NEG-CLOSE.
func (c *proxyConn) negentropy(ctx context.Context, label, sub string, data []byte) {
	if c.negSessions == nil {
		c.negSessions = make(map[string]*negSession)
	}
	idle := c.r.opts.NegIdleTimeout
	now := time.Now()
	for id, s := range c.negSessions {
		if now.Sub(s.lastUsed) > idle {
			delete(c.negSessions, id)
		}
	}
	switch label {
	case "NEG-CLOSE":
		delete(c.negSessions, sub)
	case "NEG-OPEN":
		delete(c.negSessions, sub)
		env, ok := nip77.ParseNegMessage(string(data)).(*nip77.OpenEnvelope)
		if !ok {
			c.negError(ctx, sub, "invalid: malformed NEG-OPEN")
			return
		}
		if env.Filter.LimitZero {
			c.negError(ctx, sub, "invalid: limit 0")
			return
		}
		evs := c.r.store.Match(env.Filter, c.r.opts.NegCap)
		if max := c.r.opts.NegMaxEvents; max > 0 && len(evs) > max {
			c.negError(ctx, sub, NegErrTooMany)
			return
		}
		vec := vector.New()
		for _, ev := range evs {
			vec.Insert(ev.CreatedAt, ev.ID)
		}
		vec.Seal()
		s := &negSession{neg: negentropy.New(vec, negFrameLimit), lastUsed: now}
		c.negReconcile(ctx, sub, s, env.Message)
	case "NEG-MSG":
		s := c.negSessions[sub]
		if s == nil {
			c.negError(ctx, sub, NegErrClosed)
			return
		}
		env, ok := nip77.ParseNegMessage(string(data)).(*nip77.MessageEnvelope)
		if !ok {
			delete(c.negSessions, sub)
			c.negError(ctx, sub, "invalid: malformed NEG-MSG")
			return
		}
		s.lastUsed = now
		c.negReconcile(ctx, sub, s, env.Message)
	}
}

func (c *proxyConn) negReconcile(ctx context.Context, sub string, s *negSession, msg string) {
	out, err := s.neg.Reconcile(msg)
	if err != nil {
		delete(c.negSessions, sub)
		c.negError(ctx, sub, "PROTOCOL-ERROR: "+err.Error())
		return
	}
	c.sendJSON(ctx, []any{"NEG-MSG", sub, out})
	if out == "" {
		delete(c.negSessions, sub)
		return
	}
	c.negSessions[sub] = s
}
