package check

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// hostedProbeLimit bounds the announcements check reads from the own relay.
const hostedProbeLimit = 1000

// probeHosted reads the own relay's repository announcements and says how
// many of them the sidecar will sync. With service_domain set, only those
// naming it in `clone` and `relays` count (GRASP-01): a service_domain that
// no announcement names makes the sidecar sync nothing, without an error.
func probeHosted(ctx context.Context, rep *Report, conn *relay.Conn, cfg *config.Config, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	anns, err := readEvents(ctx, conn, "grasp-sync-check-hosted",
		nostr.Filter{Kinds: []int{nip34.KindRepoAnnouncement}, Limit: hostedProbeLimit})
	if err != nil {
		rep.add("repositories", "unknown")
		rep.warn("could not read the own relay's repository announcements: %s", oneLine(err))
		return
	}
	n := fmt.Sprintf("%d", len(anns))
	if len(anns) >= hostedProbeLimit {
		n = fmt.Sprintf("the first %d", len(anns))
	}
	switch {
	case cfg.Sync.HostAll:
		rep.add("repositories", "%s announcements on the own relay, all synced (sync.host_all)", n)
		return
	case cfg.ServiceDomain == "":
		rep.add("repositories", "%s announcements on the own relay, all synced (no service_domain: the relay's acceptance decides)", n)
		return
	}
	hosted := 0
	for _, ev := range anns {
		if nip34.ListsService(ev, cfg.ServiceDomain) {
			hosted++
		}
	}
	rep.add("repositories", "%d of %s announcements on the own relay list service_domain %s in clone and relays: those are synced", hosted, n, cfg.ServiceDomain)
	if hosted == 0 && len(anns) > 0 {
		hint := "set service_domain to the host they name, or sync.host_all to sync every announcement the relay accepted"
		if h := commonService(anns); h != "" {
			hint = fmt.Sprintf("%d of them name %s: is that this service's service_domain? (or sync.host_all syncs every announcement the relay accepted)", countService(anns, h), h)
		}
		rep.warn("no announcement on the own relay lists service_domain %s in both clone and relays (GRASP-01), so grasp-sync will sync nothing; %s", cfg.ServiceDomain, hint)
	}
}

// commonService is the host most announcements name in both `clone` and
// `relays`, or "".
func commonService(anns []*nostr.Event) string {
	counts := map[string]int{}
	best := ""
	for _, ev := range anns {
		seen := map[string]bool{}
		for _, tag := range ev.Tags {
			if len(tag) < 2 || tag[0] != "relays" {
				continue
			}
			for _, raw := range tag[1:] {
				u, err := url.Parse(strings.TrimSpace(raw))
				if err != nil || u.Host == "" || seen[strings.ToLower(u.Host)] || !nip34.ListsService(ev, u.Host) {
					continue
				}
				h := strings.ToLower(u.Host)
				seen[h] = true
				counts[h]++
				if counts[h] > counts[best] || (counts[h] == counts[best] && h < best) {
					best = h
				}
			}
		}
	}
	return best
}

func countService(anns []*nostr.Event, host string) int {
	n := 0
	for _, ev := range anns {
		if nip34.ListsService(ev, host) {
			n++
		}
	}
	return n
}

// readEvents sends one REQ and collects its events until EOSE; a CLOSED is
// an error.
func readEvents(ctx context.Context, conn *relay.Conn, subID string, f nostr.Filter) ([]*nostr.Event, error) {
	var evs []*nostr.Event
	answer, reason, err := request(ctx, conn, subID, nostr.Filters{f}, func(ev *nostr.Event) { evs = append(evs, ev) }, false)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w (%d announcements read)", err, len(evs))
	case answer == "CLOSED":
		return nil, fmt.Errorf("REQ closed: %s", reason)
	}
	return evs, nil
}
