package check

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/neg"
	"github.com/grasp-sync/grasp-sync/internal/nip34"
	"github.com/grasp-sync/grasp-sync/internal/relay"
)

// writeProbeKind is the kind of the write probe: ephemeral (NIP-01:
// 20000-29999), so a relay that accepts it passes it on and stores
// nothing.
const writeProbeKind = 29617

// writeProbe is what the own relay did with an event about no repository.
type writeProbe struct {
	answered bool   // an OK came
	accepted bool   // OK true
	reason   string // the OK's message
}

// probeWrites sends the own relay an ephemeral event about no repository,
// signed by a key made for it, and returns its answer: a GRASP-01 relay,
// or strfry with grasp-sync strfry-policy as its write policy, refuses it;
// an open relay accepts it (and, the event being ephemeral, stores
// nothing).
func probeWrites(ctx context.Context, conn *relay.Conn, timeout time.Duration) writeProbe {
	ev := &nostr.Event{Kind: writeProbeKind, CreatedAt: nostr.Now(),
		Content: "grasp-sync check: does this relay take events about no git repository? (ephemeral: not stored)"}
	if err := ev.Sign(nostr.GeneratePrivateKey()); err != nil {
		return writeProbe{}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Listening for it first: some relays (khatru) answer an ephemeral
	// event nobody listens for with "mute:", which is no refusal.
	sub, err := conn.Subscribe(ctx, "grasp-sync-check-write", nostr.Filters{{Kinds: []int{writeProbeKind}, Authors: []string{ev.PubKey}}})
	if err != nil {
		return writeProbe{}
	}
	defer sub.Close()
	for eose := false; !eose; {
		select {
		case msg, ok := <-sub.Messages():
			if !ok || msg.Type == relay.MsgClosed {
				return writeProbe{}
			}
			eose = msg.Type == relay.MsgEOSE
		case <-ctx.Done():
			return writeProbe{}
		}
	}
	r := conn.PublishWait(ctx, ev)
	if !r.OK && strings.HasPrefix(r.Reason, "mute:") {
		return writeProbe{}
	}
	if r.Err != nil {
		return writeProbe{}
	}
	return writeProbe{answered: true, accepted: r.OK, reason: r.Reason}
}

// describeOpenness tells whether the own relay keeps to GRASP-01 for
// writes. The write probe decides where it was answered: refused, the
// relay has a write policy (strfry's NIP-11 cannot say so); accepted while
// NIP-11 states neither supported_grasps nor restricted_writes, it takes
// anything. Unanswered, NIP-11 alone decides.
func describeOpenness(rep *Report, info *info, probe writeProbe) {
	stated := info != nil && (len(info.SupportedGrasps) > 0 || info.flag("restricted_writes"))
	switch {
	case probe.answered && !probe.accepted:
		rep.add("write policy", "refuses an event about no repository (%s)", oneLineText(probe.reason))
		return
	case probe.answered && stated:
		rep.add("write policy", "accepted an ephemeral event about no repository, although NIP-11 states GRASP or restricted writes")
		return
	case probe.answered:
		rep.add("write policy", "none seen: accepted an ephemeral event about no repository")
	case stated:
		return
	}
	rep.warn("the own relay looks open: it accepts events about no repository (or, unprobed, its NIP-11 states no supported_grasps and no restricted_writes), so it may store any event anyone sends, not only GRASP-01 ones (strfry: set relay.writePolicy.plugin to grasp-sync strfry-policy, see the README; or run a GRASP relay)")
}

// oneLineText is s on one line, at most 200 characters.
func oneLineText(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	if s == "" {
		s = "no reason given"
	}
	return s
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
