package harness

import (
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// observer holds counters and message logs.
type observer struct {
	mu       sync.Mutex
	limit    int
	connSeq  int
	stats    Stats
	recvLog  []Msg
	sentLog  []Msg
	openConn int
}

func (o *observer) init(limit int) {
	o.limit = limit
	o.stats.Received = make(map[string]int)
	o.stats.Sent = make(map[string]int)
	o.stats.ReceivedBytes = make(map[string]int64)
	o.stats.SentBytes = make(map[string]int64)
}

func (o *observer) appendLog(log []Msg, m Msg) []Msg {
	log = append(log, m)
	if len(log) >= 2*o.limit {
		log = append(log[:0:0], log[len(log)-o.limit:]...)
	}
	return log
}

func (o *observer) refused() {
	o.mu.Lock()
	o.stats.Refused++
	o.mu.Unlock()
}

func (o *observer) connect() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.connSeq++
	o.stats.Connections++
	o.stats.OpenConnections++
	o.recvLog = o.appendLog(o.recvLog, Msg{Time: time.Now(), Conn: o.connSeq, Type: TypeConnect})
	return o.connSeq
}

func (o *observer) disconnect(c *proxyConn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stats.OpenConnections--
	o.stats.OpenSubs -= len(c.subs)
	c.subs = map[string]struct{}{}
	o.recvLog = o.appendLog(o.recvLog, Msg{Time: time.Now(), Conn: c.id, Type: TypeDisconnect})
}

func (o *observer) received(c *proxyConn, label, sub, evID string, data []byte) int {
	m := Msg{Conn: c.id, Type: label}
	switch label {
	case "EVENT":
		m.EventID = evID
	case "NEG-MSG":
		m.SubID = sub
	case "REQ", "CLOSE", "NEG-OPEN", "NEG-CLOSE", "COUNT":
		m.SubID = sub
		m.Raw = string(data)
	default:
		m.Raw = string(data)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	m.Time = time.Now() // under the lock, so the log stays ordered
	c.recv++
	o.stats.Received[label]++
	o.stats.BytesIn += int64(len(data))
	o.stats.ReceivedBytes[label] += int64(len(data))
	if label == "NEG-OPEN" {
		o.stats.NegOpenMsgBytes += int64(len(gjson.GetBytes(data, "3").Str))
	}
	o.recvLog = o.appendLog(o.recvLog, m)
	return c.recv
}

func (o *observer) sent(c *proxyConn, label, sub string, data []byte) int {
	m := Msg{Conn: c.id, Type: label}
	switch label {
	case "EVENT", "NEG-MSG":
		m.SubID = sub
	case "OK":
		m.EventID = sub
		m.Raw = string(data)
	case "NOTICE":
		m.Raw = string(data)
	default:
		m.SubID = sub
		m.Raw = string(data)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	m.Time = time.Now()
	c.sent++
	o.stats.Sent[label]++
	o.stats.BytesOut += int64(len(data))
	o.stats.SentBytes[label] += int64(len(data))
	o.sentLog = o.appendLog(o.sentLog, m)
	return c.sent
}

func (o *observer) countEvent(c *proxyConn) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	c.events++
	return c.events
}

// openSub records a REQ; it reports false when enforce is set and the
// connection already has max subscriptions open.
func (o *observer) openSub(c *proxyConn, sub string, enforce bool, max int) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := c.subs[sub]; ok {
		return true // a REQ reusing an open id replaces it
	}
	if enforce && max > 0 && len(c.subs) >= max {
		return false
	}
	c.subs[sub] = struct{}{}
	o.stats.OpenSubs++
	o.stats.PeakSubs = max2(o.stats.PeakSubs, o.stats.OpenSubs)
	o.stats.PeakSubsPerConn = max2(o.stats.PeakSubsPerConn, len(c.subs))
	return true
}

func max2(a, b int) int {
	if a > b {
		return a
	}
	return b
}

func (o *observer) closeSub(c *proxyConn, sub string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := c.subs[sub]; ok {
		delete(c.subs, sub)
		o.stats.OpenSubs--
	}
}

// Stats returns a snapshot of the relay's counters.
func (r *Relay) Stats() Stats {
	o := &r.obs
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.stats
	s.Received = make(map[string]int, len(o.stats.Received))
	for k, v := range o.stats.Received {
		s.Received[k] = v
	}
	s.Sent = make(map[string]int, len(o.stats.Sent))
	for k, v := range o.stats.Sent {
		s.Sent[k] = v
	}
	s.ReceivedBytes = maps.Clone(o.stats.ReceivedBytes)
	s.SentBytes = maps.Clone(o.stats.SentBytes)
	s.Reqs = s.Received["REQ"]
	s.Closes = s.Received["CLOSE"]
	s.Events = s.Received["EVENT"]
	s.NegOpens = s.Received["NEG-OPEN"]
	s.NegMsgs = s.Received["NEG-MSG"]
	s.NegCloses = s.Received["NEG-CLOSE"]
	return s
}

// ResetStats zeroes the counters and empties the logs. Open connections and
// subscriptions stay counted; peaks restart from the current values.
func (r *Relay) ResetStats() {
	conns := r.connections()
	o := &r.obs
	o.mu.Lock()
	defer o.mu.Unlock()
	open, subs := o.stats.OpenConnections, o.stats.OpenSubs
	o.stats = Stats{
		OpenConnections: open,
		OpenSubs:        subs,
		PeakSubs:        subs,
		Received:        make(map[string]int),
		Sent:            make(map[string]int),
		ReceivedBytes:   make(map[string]int64),
		SentBytes:       make(map[string]int64),
	}
	for _, c := range conns {
		o.stats.PeakSubsPerConn = max2(o.stats.PeakSubsPerConn, len(c.subs))
	}
	o.recvLog, o.sentLog = nil, nil
}

// OpenSubscriptions returns the ids of the subscriptions open now, per
// connection serial number.
func (r *Relay) OpenSubscriptions() map[int][]string {
	conns := r.connections()
	o := &r.obs
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[int][]string)
	for _, c := range conns {
		for s := range c.subs {
			out[c.id] = append(out[c.id], s)
		}
	}
	return out
}

// Received returns the logged client messages (and connect/disconnect
// entries) seen at or after since, oldest first.
func (r *Relay) Received(since time.Time) []Msg {
	r.obs.mu.Lock()
	defer r.obs.mu.Unlock()
	return logSince(r.obs.recvLog, since)
}

// Sent returns the logged relay messages sent at or after since, oldest first.
func (r *Relay) Sent(since time.Time) []Msg {
	r.obs.mu.Lock()
	defer r.obs.mu.Unlock()
	return logSince(r.obs.sentLog, since)
}

func logSince(log []Msg, t time.Time) []Msg {
	i := sort.Search(len(log), func(i int) bool { return !log[i].Time.Before(t) })
	return append([]Msg(nil), log[i:]...)
}
