// Package health tracks the health of remote relays for the sync engine:
// connection states, capped exponential backoff with jitter, rate-limit
// cooldowns, a naughty list for hard failures, relay-announced limits
// (NIP-11 and learned from NOTICEs), the per-relay Prometheus gauges, and
// the request budget and refusal backoff of each relay (Pacer).
//
// The package does no I/O. The sync engine reports what happened on each
// connection (AttemptStarted, Connected, Achieved, Failed, Disconnected,
// Observe, SetLimits) and asks what it may do next (CanAttempt, Due,
// CooldownRemaining, SubscriptionBudget, Limits). Learned turns the
// refusals that teach a limit into the bound the tracker keeps. A Pacer,
// apart from the Tracker, is what every request and dial waits for: a
// token bucket per relay and a growing wait after each refusal. Time comes
// from an injected Clock so tests can walk a 24 hour rule in microseconds.
//
// # States
//
//	Healthy       connected and stable (no failures, or the stability period
//	              after a recovery has elapsed)
//	Disconnected  not connected, no failures outstanding
//	Degraded      failing to connect, or recovered but not yet stable
//	Dead          failing continuously for DeadAfter; one attempt per
//	              DeadRetry
//	RateLimited   the relay told us to slow down; for RateLimitCooldown no
//	              connection attempt, REQ or NEG-OPEN goes to it, then the
//	              relay is back in whatever state the other rules give it
//
// A recovered relay is Degraded until the stability period elapses, then
// Healthy: it is never shown Disconnected while its connection is live, which
// would mislead operators. A first connection with no failures behind it is
// Healthy at once, and a normal disconnection of a Healthy relay makes it
// Disconnected.
//
// # Use
//
// Relays are keyed by URL exactly as given: normalise URLs before Track.
// Reports about relays that are not tracked are ignored. A retry tick (every
// Config.Tick) connects the relays returned by Due, calling AttemptStarted
// before dialling with ConnectTimeout and Connected or Failed after; Run (or
// the engine's own call to Tick on the same tick) keeps the metrics and the
// time-based transitions current. Handshake refusals are errors exposing
// HandshakeStatus() int (such as relay.HandshakeError), so that
// ClassifyError can tell a 429 from a page that is not a websocket.
//
// # Metrics
//
// ngit_sync_relay_status{relay} (the State value), ngit_sync_relay_failures{relay},
// ngit_sync_relays_dead and ngit_sync_relays_rate_limited (gauges of the
// current count; the reference implementation calls them *_total), set on
// every Tick. Forget deletes a relay's series.
//
// The failure counter that drives backoff is cleared once a connection
// answers a request (Achieved: an event, an EOSE, a NEG-MSG or an OK;
// OnFirstAnswer is the hook) or, answering nothing, has been stable for
// StabilityPeriod. A connection that answered and then dropped is no
// failure: the relay is reconnected after ReconnectWait (ResumeWait when
// the relay closed it in order after it delivered events to a sync in
// progress: Delivered), so one that cuts
// every connection after a few seconds is synced at the rate it allows,
// while a relay that accepts connections and drops them before answering
// keeps backing off further. The Dead clock (continuous failures)
// restarts on every established connection.
package health
