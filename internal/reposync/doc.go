// Package reposync is the sync engine: it drives every remote relay
// (connect, reconnect, teardown), its live subscriptions and its historic
// jobs, for the repositories discovery finds on the own relay, handing
// every event it receives to the ingest handler.
//
// One goroutine (Engine.Run) owns the sync indexes (discovery's
// repository index, each relay's state and pending batches) and receives
// every input as a message on its inbox (post), so "is anything pending?"
// is a plain read. liveSubs and jobScheduler are the engine seen from its
// live subscriptions and its historic jobs; their methods run on the same
// goroutine. Relay readers, historic jobs, discovery and the trusted
// syncer run on goroutines of their own and only post to Run.
//
// Files: settings.go (Settings: the user settings; its bounds are repoindex.Bounds), engine.go
// (Config, Engine, Run), relaylifecycle.go,
// relaytargets.go (compute_actions over the relays), livesubs.go,
// livekindsub.go and sincesubs.go (live subscriptions), historicjobs.go,
// jobqueue.go and slotlending.go (historic jobs), learnedlimits.go,
// persistrelays.go, timers.go, status.go, metrics.go.
package reposync
