// Package harness runs real khatru relays on 127.0.0.1 for tests and
// benchmarks, and builds signed NIP-34 events.
//
// A relay from StartRelay is khatru (v0.19.1, go-nostr v0.52.3) on an
// uncapped in-memory Store, behind a small WebSocket proxy that owns the
// public port. The proxy records every message (Stats, Received, Sent) and
// injects faults (Faults); the relay can be stopped and restarted on the same
// port with the same store. Options add NIP-77, a strfry-like silent REQ cap,
// a NEG-ERR cap, a GRASP-like acceptance policy and max_subscriptions.
//
//	r, err := harness.StartRelay(harness.RelayOptions{Negentropy: true, ReqCap: 500})
//	defer r.Close()
//	k := harness.NewKey()
//	ann := k.Announcement("repo", harness.WithClone(...), harness.WithRelays(r.URL()))
//	err = harness.Publish(ctx, r.URL(), ann)       // through the front door
//	r.Inject(k.Issue(harness.Address(ann), "bug")) // behind the subscriptions' back
//	harness.Eventually(t, 10*time.Second, func() bool { return r.Count(f) == 2 })
package harness
