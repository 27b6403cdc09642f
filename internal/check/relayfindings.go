package check

import (
	"context"
	"errors"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// describeOpenness warns when the own relay looks like it accepts any
// event: a GRASP relay advertises supported_grasps and restricts writes.
func describeOpenness(rep *Report, info *info) {
	if len(info.SupportedGrasps) > 0 || info.flag("restricted_writes") {
		return
	}
	rep.warn("the own relay looks open: its NIP-11 states no supported_grasps and no restricted_writes, so it may store any event anyone sends, not only GRASP-01 ones (strfry: set relay.writePolicy.plugin to grasp-sync strfry-policy, see the README; strfry's NIP-11 cannot say so, so there the warning stays; or run a GRASP relay)")
}

// compareLimits warns where the relay's announced limits and the sidecar's
// settings disagree in a way that loses or slows something.
func compareLimits(rep *Report, info *info, cfg *config.Config) {
	if info.Limitation == nil {
		return
	}
	l := info.limits
	// NEG-MSG frames are sent as hex: twice the binary frame limit plus the
	// envelope.
	if frame := 2*cfg.Negentropy.FrameLimit + 200; cfg.Negentropy.Enabled && l.MaxMessageLength > 0 && l.MaxMessageLength < frame {
		rep.warn("the relay's max_message_length %d is below the NEG-MSG frames grasp-sync sends (negentropy.frame_limit %d binary, about %d bytes as hex): lower negentropy.frame_limit to %d",
			l.MaxMessageLength, cfg.Negentropy.FrameLimit, frame, max(4096, (l.MaxMessageLength-200)/2))
	}
	if l.MaxLimit > 0 && l.MaxLimit < cfg.Sync.PageSize {
		rep.warn("the relay's max_limit %d is below sync.page_size %d: pages are cut to %d events (paging copes; set sync.page_size %d to match)",
			l.MaxLimit, cfg.Sync.PageSize, l.MaxLimit, l.MaxLimit)
	}
	if n := l.MaxEventTags; n > 0 && n < cfg.Limits.MaxEventTags {
		rep.warn("the relay's max_event_tags %d is below limits.max_event_tags %d: events with more tags are synced but refused by the relay",
			n, cfg.Limits.MaxEventTags)
	}
	if n := l.MaxContentLength; n > 0 && n < cfg.Limits.MaxEventBytes {
		rep.warn("the relay's max_content_length %d is below limits.max_event_bytes %d: large patches are synced but refused by the relay",
			n, cfg.Limits.MaxEventBytes)
	}
	if n := l.CreatedAtLowerLimit; n > 0 {
		rep.warn("the relay refuses events older than created_at_lower_limit %s: older repository history is synced but refused", (time.Duration(n) * time.Second).String())
	}
}

// probeNegentropy reconciles an empty set with the own relay's git events
// over NIP-77, as the sync does, and reports whether the relay serves it
// and whether it looks capped.
func probeNegentropy(ctx context.Context, rep *Report, conn *relay.Conn, cfg *config.Config, advertised bool, timeout time.Duration) {
	if !cfg.Negentropy.Enabled {
		rep.add("negentropy", "off (negentropy.enabled: false)")
		return
	}
	opt := neg.DefaultOptions()
	opt.FrameLimit = cfg.Negentropy.FrameLimit
	opt.InitialTimeout = min(timeout, cfg.Negentropy.InitialTimeout)
	opt.IdleTimeout = min(timeout, cfg.Negentropy.IdleTimeout)
	opt.MaxInboundHex = 2 * cfg.Relay.MaxMessageBytes
	filter := nostr.Filter{Kinds: []int{nip34.KindRepoAnnouncement, nip34.KindRepoState, nip34.KindPatch, nip34.KindPullRequest, nip34.KindPRUpdate, nip34.KindIssue}}
	ctx, cancel := context.WithTimeout(ctx, 2*timeout)
	defer cancel()
	res, err := neg.Reconcile(ctx, conn, "grasp-sync-check-neg", filter, neg.NewStorage(nil), opt)
	adv := "advertised"
	if !advertised {
		adv = "not advertised"
	}
	switch {
	case errors.Is(err, neg.ErrUnsupported):
		rep.add("negentropy", "NIP-77 %s, not served (%s)", adv, oneLine(err))
		rep.warn("the own relay does not serve NIP-77: GRASP services that sync from it fall back to REQ paging, and grasp-sync's own-relay set is filled by REQ")
	case errors.Is(err, neg.ErrBlocked):
		rep.add("negentropy", "NIP-77 %s, served, but the git-event set was refused (%s)", adv, oneLine(err))
		rep.warn("the own relay caps NIP-77 sets (%s): raise its limit (strfry: relay.negentropy.maxSyncEvents)", oneLine(err))
	case err != nil:
		rep.add("negentropy", "NIP-77 %s, probe failed: %s", adv, oneLine(err))
		rep.warn("NIP-77 probe of the own relay failed: %s", oneLine(err))
	default:
		n := len(res.Need)
		rep.add("negentropy", "NIP-77 %s and served: %d git events in %s", adv, n, roundLatency(res.Duration))
		for _, c := range relay.CommonCaps {
			if n == c {
				rep.warn("the own relay answered NIP-77 with exactly %d events, a size at which some relays cut sets silently (khatru's slicestore: 500); if it holds more, its store caps negentropy", n)
			}
		}
		if !advertised {
			rep.warn("the own relay serves NIP-77 but does not list 77 in supported_nips: other services may not use it")
		}
	}
}

// advertisesNEG tells whether NIP-11 lists NIP-77 (false without NIP-11).
func advertisesNEG(i *info) bool { return i != nil && i.supportsNIP(77) }
