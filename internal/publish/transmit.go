package publish

import (
	"time"

	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// transmit sends it on s: the bytes it arrived in when it has them (no
// re-encoding on the forwarding path), else ev encoded.
func (r *runner) transmit(s *session, it *item) {
	r.sendSeq++
	it.sendID = r.sendSeq
	it.sends++
	it.sentAt = time.Now()
	it.sentAuth = s.auth
	it.sess = s
	r.inflight[it.ev.ID] = it
	var ch <-chan relay.OKResult
	if it.raw != nil {
		ch = s.conn.PublishRaw(r.ctx, it.ev.ID, it.raw)
	} else {
		ch = s.conn.Publish(r.ctx, it.ev)
	}
	r.wg.Add(1)
	go r.await(ch, it.ev.ID, it.sendID)
}
