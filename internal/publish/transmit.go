package publish

import (
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// transmit sends it on s: the bytes it arrived in when it has them (no
// re-encoding on the forwarding path), else ev encoded. Its answer comes
// on r.okCh. A write that fails puts it back to be sent again and returns
// false: the connection has ended, or Run's context.
func (r *runner) transmit(s *session, it *item) bool {
	r.sendSeq++
	it.sendID = r.sendSeq
	it.sends++
	it.sentAt = r.p.clock.Now()
	it.sentAuth = s.auth
	it.sess = s
	r.inflight[it.ev.ID] = it
	it.flying = true
	if err := s.conn.Send(r.ctx, it.ev, it.raw, it.sendID, r.okCh); err != nil {
		r.handleOK(okMsg{id: it.ev.ID, sendID: it.sendID, res: relay.OKResult{Err: err}})
		return false
	}
	r.sent = append(r.sent, sentRef{it: it, sendID: it.sendID})
	r.armOKTimer()
	return true
}
