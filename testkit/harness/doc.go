// Package harness runs real khatru relays on 127.0.0.1 for tests and
// benchmarks, with the faults and quirks of relays in the wild.
//
// # Relays
//
// StartRelay starts khatru (v0.19.1, with go-nostr v0.52.3) on an uncapped
// in-memory Store, behind a small WebSocket proxy that owns the public port.
// The proxy records every message (Stats, Received, Sent, OpenSubscriptions)
// and injects faults (Faults, changeable with SetFaults); Stop and Restart
// keep the port and the store. RelayOptions add NIP-77, a strfry-like silent
// REQ cap (newest ReqCap events, no NOTICE), a NEG-ERR cap, a GRASP-like
// acceptance policy (GraspPolicy), NIP-11 max_subscriptions with optional
// strfry-style enforcement, and NIP-42 AUTH for reads or writes. Relays as
// they are in the wild (README.md, "Remote relays as they are"): NegCap and
// SilentReqCap (khatru on its slicestore: 500, negentropy included, nothing
// announced),
// DefaultLimit/MaxHonouredLimit (ngit-relay: 250 above 1000), IgnoreLimit,
// IgnoreUntil, NegNotice (NIP-77 advertised, NEG-OPEN answered with a
// NOTICE), MaxFilters and MaxMessageSize (strfry: 200 and 131,072;
// AnnounceMaxMessage announces another size or none), MaxTagValues
// (eventstore's "too many tag values"),
// AuthChallengeOnConnect, and HoldPurgatory (a GRASP-01 own relay's OK true
// "purgatory:"). StartKhatru serves plain khatru, without the proxy, for
// tests of khatru's own behaviour.
//
//	r, err := harness.StartRelay(harness.RelayOptions{Negentropy: true, ReqCap: 500})
//	defer r.Close()
//	k := signed.NewKey()
//	ann := k.Announcement("repo", signed.WithClone(cloneURL), signed.WithRelays(r.URL()))
//	err = r.Publish(ctx, ann)                       // through the front door, waits for OK
//	r.Inject(k.Issue(signed.Address(ann), "bug"))  // behind the subscriptions' back
//	testkit.WaitFor(t, 10*time.Second, "both events", func() bool { return r.Count(f) == 2 })
//
// Why not plain khatru: eventstore's slicestore caps every query (negentropy
// sets included) at MaxLimit, 500 by default, and its SaveEvent does not lock;
// khatru v0.19.1 answers NEG-OPEN before storing the session, so a fast
// client's first NEG-MSG often fails with ["NEG-ERROR", id, "CLOSED"], and it
// reads the AUTH state without a lock. The proxy therefore serves NIP-77 and
// AUTH itself, per connection and in order, with go-nostr's negentropy code.
//
// # Clients
//
// go-nostr v0.52.3's Relay has a data race in Close (relay.go:175 against
// :576) that fails tests under -race; Client (Dial, Send, Next, Req,
// Negentropy) is a minimal race-free replacement for tests. Publish and
// PublishWindow send events and collect OK results.
//
// Signed NIP-34 events, keys and generated universes are testkit/signed.
package harness
