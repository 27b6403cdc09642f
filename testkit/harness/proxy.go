package harness

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip42"
	"github.com/tidwall/gjson"
)

// Faults are misbehaviours a relay can be told to show. The zero value is a
// well-behaved relay. Change them at any time with Relay.SetFaults.
type Faults struct {
	// Refuse answers every HTTP request, WebSocket upgrades included, with
	// 503 Service Unavailable: the port is open but no relay is there.
	Refuse bool
	// PlainHTTP answers every request with a 200 HTML page and never
	// upgrades to WebSocket.
	PlainHTTP bool
	// DropOnReceive, when positive, closes a connection abruptly (no close
	// frame) when the client sends its DropOnReceive-th message on it; that
	// message is recorded but not processed.
	DropOnReceive int
	// DropAfterSend, when positive, closes a connection abruptly right after
	// the relay has sent DropAfterSend messages on it.
	DropAfterSend int
	// CutAfter, when positive, cuts every connection opened while it is set
	// abruptly (the TCP connection closed, no close frame) a random
	// duration in [CutAfter, CutAfterMax] after it opened (CutAfter when
	// CutAfterMax is not larger): a relay behind a proxy that drops
	// connections every few seconds.
	CutAfter, CutAfterMax time.Duration
	// CloseAfterEvents, when positive, closes a connection with a
	// WebSocket close frame of status CloseCode (default 1011, internal
	// error) right after the relay has sent CloseAfterEvents EVENT
	// messages on it: a relay that gives up on a connection after
	// serving so many events.
	CloseAfterEvents int
	CloseCode        int
	// ReqNotice, when set, answers every REQ with a NOTICE carrying it (e.g.
	// "rate-limited: slow down") and otherwise ignores the REQ.
	ReqNotice string
	// ReqClosed, when set, answers every REQ with a CLOSED carrying it (e.g.
	// "rate-limited: too many requests") instead of serving it.
	ReqClosed string
	// NegErr, when set, answers every NEG-OPEN with a NEG-ERR carrying it
	// (e.g. "restricted: members only") instead of serving it.
	NegErr string
	// NoEOSE serves REQs but never sends EOSE.
	NoEOSE bool
	// WithholdIDs answers every REQ that asks for events by id with EOSE
	// alone, IDsAfter later: a relay that lacks what it reconciled (or
	// hides it).
	WithholdIDs bool
	// DropOnIDs closes a connection abruptly IDsAfter after the client
	// asked for events by id on it, answering nothing.
	DropOnIDs bool
	// IDsAfter is how long WithholdIDs and DropOnIDs hold the REQ.
	IDsAfter time.Duration
	// ForgeIDs serves REQs that ask for events by id with each event's
	// signature replaced by zeros: the events reconcile (their ids are
	// right) but are forged copies.
	ForgeIDs bool
	// IgnoreNegentropy swallows NEG-OPEN, NEG-MSG and NEG-CLOSE without any
	// answer.
	IgnoreNegentropy bool
	// EventReject, when set, answers every EVENT with OK false carrying it
	// (e.g. "rate-limited: slow down") without storing the event.
	EventReject string
	// EventIgnore swallows every EVENT without an answer (no OK, nothing
	// stored): a relay whose writes hang.
	EventIgnore bool
	// EventLimit, when positive, answers EVENTs beyond the first EventLimit on
	// a connection with OK false "rate-limited: too many events".
	EventLimit int
	// Mute reads and records client messages but never answers them.
	Mute bool
	// Delay holds every answer khatru sends (stored events, EOSE, OK, …)
	// for this long: a slow relay. Live events and the fault answers above
	// are not delayed.
	Delay time.Duration
	// Latency is a one-way network delay on connections opened while it
	// is set: every message in either direction arrives this long after
	// it was sent, in order and without limiting throughput (a relay
	// Latency away: a round trip takes 2×Latency).
	Latency time.Duration
}

// Msg.Type of the connection lifecycle entries in the Received log.
const (
	TypeConnect    = "connect"
	TypeDisconnect = "disconnect"
)

// Msg is one entry of a relay's message log.
type Msg struct {
	// Time is when the front door saw the message.
	Time time.Time
	// Conn is the connection's serial number, starting at 1 for the first
	// connection the relay accepted.
	Conn int
	// Type is the message label ("REQ", "EVENT", "NEG-OPEN", "EOSE", …) or
	// TypeConnect / TypeDisconnect.
	Type string
	// SubID is the subscription id, where the message has one.
	SubID string
	// EventID is the event id of an EVENT received and of an OK sent.
	EventID string
	// Raw is the message text, except for EVENT and NEG-MSG messages, which
	// are left out to bound memory.
	Raw string
}

// Stats are the relay's counters since start (or the last ResetStats).
// Counters survive Restart.
type Stats struct {
	// Connections counts WebSocket connections accepted.
	Connections int
	// OpenConnections is the number of connections open now.
	OpenConnections int
	// Refused counts HTTP requests answered by the Refuse or PlainHTTP faults.
	Refused int
	// Received counts client messages by label.
	Received map[string]int
	// Sent counts relay messages by label.
	Sent map[string]int
	// Reqs, Closes, Events, NegOpens, NegMsgs and NegCloses repeat the
	// corresponding Received counts.
	Reqs, Closes, Events, NegOpens, NegMsgs, NegCloses int
	// OpenSubs is the number of subscriptions open now over all connections:
	// a REQ opens one (unless refused), CLOSE, CLOSED or the end of the
	// connection closes it.
	OpenSubs int
	// PeakSubs is the highest OpenSubs seen.
	PeakSubs int
	// PeakSubsPerConn is the highest number of subscriptions open at once on
	// any single connection.
	PeakSubsPerConn int
	// BytesIn and BytesOut count WebSocket message payload bytes received
	// from and sent to clients (frame headers not included).
	BytesIn, BytesOut int64
	// ReceivedBytes and SentBytes split BytesIn and BytesOut by label.
	ReceivedBytes, SentBytes map[string]int64
	// NegOpenMsgBytes counts the hex initial messages inside NEG-OPENs
	// (the rest of a NEG-OPEN is its filter).
	NegOpenMsgBytes int64
}

type proxyConn struct {
	r        *Relay
	id       int
	client   *websocket.Conn
	upstream *websocket.Conn
	cancel   context.CancelFunc
	killOnce sync.Once

	// down carries messages to the client across a delayed link (nil
	// without Faults.Latency).
	down chan timedFrame

	// used by pumpUp only
	negSessions map[string]*negSession
	challenge   string
	authed      string

	// live are the filters of the subscriptions forwarded to khatru, for
	// the harness's own broadcast (see Relay.storeAndBroadcast).
	liveMu sync.Mutex
	live   map[string]nostr.Filters
	// forged are the subscriptions whose events are sent forged
	// (Faults.ForgeIDs); guarded by liveMu.
	forged map[string]bool

	// sentEvents counts the EVENT messages sent (CloseAfterEvents).
	sentEvents atomic.Int64

	// guarded by r.obs.mu
	subs   map[string]struct{}
	recv   int
	sent   int
	events int
}

// cutDuration is how long after it opened a connection is cut
// (Faults.CutAfter), drawn per connection.
func (f Faults) cutDuration() time.Duration {
	if f.CutAfterMax <= f.CutAfter {
		return f.CutAfter
	}
	return f.CutAfter + rand.N(f.CutAfterMax-f.CutAfter)
}

// closeCode is the status of Faults.CloseAfterEvents' close frame.
func (f Faults) closeCode() websocket.StatusCode {
	if f.CloseCode == 0 {
		return websocket.StatusInternalError
	}
	return websocket.StatusCode(f.CloseCode)
}

// kill closes both sides abruptly.
func (c *proxyConn) kill() {
	c.killOnce.Do(func() {
		c.cancel()
		c.client.CloseNow()
		c.upstream.CloseNow()
	})
}

// pumpUp forwards client messages to khatru, applying faults.
func (c *proxyConn) pumpUp(ctx context.Context, read func(context.Context) (websocket.MessageType, []byte, error)) {
	for {
		typ, data, err := read(ctx)
		if err != nil {
			return
		}
		res := gjson.GetManyBytes(data, "0", "1", "1.id")
		label, sub := res[0].String(), res[1].String()
		f := c.r.Faults()
		n := c.r.obs.received(c, label, sub, res[2].String(), data)
		if f.DropOnReceive > 0 && n >= f.DropOnReceive {
			return
		}
		if f.Mute {
			continue
		}
		forward := true
		switch label {
		case "AUTH":
			c.auth(ctx, data)
			forward = false
		case "EVENT":
			evID := res[2].String()
			switch {
			case c.r.opts.AuthWrites && c.authed == "":
				c.sendJSON(ctx, []any{"AUTH", c.challenge})
				c.sendJSON(ctx, []any{"OK", evID, false, ReasonAuthRequired})
				forward = false
			case c.r.opts.HoldPurgatory != nil && c.holdPurgatory(data):
				c.sendJSON(ctx, []any{"OK", evID, true, ReasonPurgatory})
				forward = false
			case f.EventReject != "":
				c.sendJSON(ctx, []any{"OK", evID, false, f.EventReject})
				forward = false
			case f.EventIgnore:
				forward = false
			case f.EventLimit > 0 && c.r.obs.countEvent(c) > f.EventLimit:
				c.sendJSON(ctx, []any{"OK", evID, false, "rate-limited: too many events"})
				forward = false
			}
		case "REQ":
			switch {
			case c.r.opts.AuthReads && c.authed == "":
				c.sendJSON(ctx, []any{"AUTH", c.challenge})
				c.sendJSON(ctx, []any{"CLOSED", sub, ReasonAuthRequired})
				forward = false
			case (f.DropOnIDs || f.WithholdIDs) && reqByIDs(data):
				go func(sub string) {
					t := time.NewTimer(f.IDsAfter)
					defer t.Stop()
					select {
					case <-t.C:
					case <-ctx.Done():
						return
					}
					if f.DropOnIDs {
						c.kill()
						return
					}
					c.sendJSON(ctx, []any{"EOSE", sub})
				}(sub)
				forward = false
			case f.ReqNotice != "":
				c.sendJSON(ctx, []any{"NOTICE", f.ReqNotice})
				forward = false
			case f.ReqClosed != "":
				c.sendJSON(ctx, []any{"CLOSED", sub, f.ReqClosed})
				forward = false
			case c.r.opts.MaxFilters > 0 && len(gjson.ParseBytes(data).Array())-2 > c.r.opts.MaxFilters:
				c.sendJSON(ctx, []any{"CLOSED", sub, ReasonTooManyFilters})
				forward = false
			case c.r.opts.MaxTagValues > 0 && overTagValues(data, c.r.opts.MaxTagValues):
				c.sendJSON(ctx, []any{"CLOSED", sub, ReasonTooManyTagValues})
				forward = false
			case !c.r.obs.openSub(c, sub, c.r.opts.EnforceMaxSubscriptions, c.r.opts.MaxSubscriptions):
				c.sendJSON(ctx, []any{"NOTICE", "ERROR: too many concurrent REQs"})
				forward = false
			}
		case "CLOSE":
			c.r.obs.closeSub(c, sub)
			c.setLive(sub, nil)
		case "NEG-OPEN", "NEG-MSG", "NEG-CLOSE":
			if f.IgnoreNegentropy {
				forward = false
				break
			}
			if c.r.opts.NegNotice != "" {
				if label == "NEG-OPEN" {
					c.sendJSON(ctx, []any{"NOTICE", c.r.opts.NegNotice})
				}
				forward = false
				break
			}
			if f.NegErr != "" && label == "NEG-OPEN" {
				c.negError(ctx, sub, f.NegErr)
				forward = false
				break
			}
			if c.r.opts.AuthReads && c.authed == "" && label == "NEG-OPEN" {
				c.sendJSON(ctx, []any{"AUTH", c.challenge})
				c.sendJSON(ctx, []any{"NEG-ERR", sub, ReasonAuthRequired})
				forward = false
				break
			}
			if c.r.opts.Negentropy {
				c.negentropy(ctx, label, sub, data)
				forward = false
			}
			// without NIP-77 khatru answers with a NOTICE
		}
		if !forward {
			continue
		}
		if label == "REQ" {
			var env nostr.ReqEnvelope
			if env.FromJSON(string(data)) == nil {
				c.setLive(sub, env.Filters)
			}
			if f.ForgeIDs && reqByIDs(data) {
				c.liveMu.Lock()
				if c.forged == nil {
					c.forged = map[string]bool{}
				}
				c.forged[sub] = true
				c.liveMu.Unlock()
			}
		}
		if err := c.upstream.Write(ctx, typ, data); err != nil {
			return
		}
	}
}

// forge returns an EVENT message of sub with the event's signature
// replaced by zeros when sub is one of Faults.ForgeIDs' subscriptions.
func (c *proxyConn) forge(sub string, msg []byte) []byte {
	c.liveMu.Lock()
	forged := c.forged[sub]
	c.liveMu.Unlock()
	sig := gjson.GetBytes(msg, "2.sig").String()
	if !forged || sig == "" {
		return msg
	}
	return []byte(strings.Replace(string(msg), `"`+sig+`"`, `"`+strings.Repeat("0", len(sig))+`"`, 1))
}

// reqByIDs tells whether a REQ has a filter with ids.
func reqByIDs(msg []byte) bool {
	for i, f := range gjson.ParseBytes(msg).Array() {
		if i >= 2 && f.Get("ids").Exists() {
			return true
		}
	}
	return false
}

// setLive records (or, with nil, forgets) a live subscription's filters.
func (c *proxyConn) setLive(sub string, fs nostr.Filters) {
	c.liveMu.Lock()
	defer c.liveMu.Unlock()
	if fs == nil {
		delete(c.live, sub)
		delete(c.forged, sub)
		return
	}
	if c.live == nil {
		c.live = map[string]nostr.Filters{}
	}
	c.live[sub] = fs
}

// deliverLive sends ev to this connection's subscriptions that match it.
func (c *proxyConn) deliverLive(ev *nostr.Event) {
	c.liveMu.Lock()
	var subs []string
	for sub, fs := range c.live {
		for _, f := range fs {
			if f.Matches(ev) {
				subs = append(subs, sub)
				break
			}
		}
	}
	c.liveMu.Unlock()
	for _, sub := range subs {
		data, err := nostr.EventEnvelope{SubscriptionID: &sub, Event: *ev}.MarshalJSON()
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c.send(ctx, websocket.MessageText, data, "EVENT", sub)
		cancel()
	}
}

// holdPurgatory puts the published event in the relay's purgatory when
// HoldPurgatory wants it held and the store does not have it.
func (c *proxyConn) holdPurgatory(data []byte) bool {
	var ev nostr.Event
	if err := json.Unmarshal([]byte(gjson.GetBytes(data, "1").Raw), &ev); err != nil {
		return false
	}
	if ok, _ := ev.CheckSignature(); !ok || c.r.store.Get(ev.ID) != nil || !c.r.opts.HoldPurgatory(&ev) {
		return false
	}
	c.r.hold(&ev)
	return true
}

// ReasonTooManyFilters is the CLOSED reason of RelayOptions.MaxFilters.
const ReasonTooManyFilters = "invalid: too many filters in REQ"

// ReasonTooManyTagValues is the CLOSED reason of RelayOptions.MaxTagValues
// (khatru on eventstore's SQL backends).
const ReasonTooManyTagValues = "error: too many tag values"

// overTagValues tells whether a filter of the REQ msg has a tag with more
// than n values.
func overTagValues(msg []byte, n int) bool {
	over := false
	for i, f := range gjson.ParseBytes(msg).Array() {
		if i < 2 {
			continue
		}
		f.ForEach(func(k, v gjson.Result) bool {
			if strings.HasPrefix(k.String(), "#") && len(v.Array()) > n {
				over = true
			}
			return !over
		})
	}
	return over
}

// ReasonAuthRequired is the OK/CLOSED reason of AuthWrites and AuthReads.
const ReasonAuthRequired = "auth-required: authenticate with NIP-42 first"

// auth handles a NIP-42 AUTH message; the proxy answers it itself.
func (c *proxyConn) auth(ctx context.Context, data []byte) {
	raw := gjson.GetBytes(data, "1").Raw
	var ev nostr.Event
	if err := json.Unmarshal([]byte(raw), &ev); err != nil {
		c.sendJSON(ctx, []any{"NOTICE", "invalid: malformed AUTH"})
		return
	}
	if pk, ok := nip42.ValidateAuthEvent(&ev, c.challenge, c.r.URL()); ok {
		c.authed = pk
		c.sendJSON(ctx, []any{"OK", ev.ID, true, ""})
		return
	}
	c.sendJSON(ctx, []any{"OK", ev.ID, false, "error: failed to authenticate"})
}

// pumpDown forwards khatru's messages to the client, applying faults.
func (c *proxyConn) pumpDown(ctx context.Context) {
	for {
		typ, data, err := c.upstream.Read(ctx)
		if err != nil {
			c.kill()
			return
		}
		res := gjson.GetManyBytes(data, "0", "1")
		label, sub := res[0].String(), res[1].String()
		f := c.r.Faults()
		if f.Delay > 0 {
			t := time.NewTimer(f.Delay)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
		}
		switch label {
		case "EVENT":
			data = c.forge(sub, data)
		case "EOSE":
			if f.NoEOSE {
				continue
			}
		case "CLOSED":
			c.r.obs.closeSub(c, sub)
			c.setLive(sub, nil)
		}
		if !c.send(ctx, typ, data, label, sub) {
			c.kill()
			return
		}
	}
}
