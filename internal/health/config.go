package health

import (
	"errors"
	"time"

	"github.com/grasp-sync/grasp-sync/internal/backoff"
	"github.com/grasp-sync/grasp-sync/internal/setting"
)

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("invalid health config")

// Config holds every duration and limit of the Tracker. Zero is never
// "unset": start from DefaultConfig and change what you need.
//
// It is also the configuration's health section: each user setting carries
// its YAML key and help text (the flag, environment variable and
// documentation are derived from them); fields tagged yaml:"-" are not
// user settings and keep their defaults.
type Config struct {
	// BackoffBase is the wait after the first consecutive failure; the n-th
	// failure waits BackoffBase·2^(n−1), capped at BackoffMax. It is also
	// the connection timeout (Tracker.ConnectTimeout), so a hanging dial
	// never outlives the first backoff. Default 5s.
	BackoffBase time.Duration `yaml:"backoff_base" help:"First reconnect delay; doubles per failure (base·2^(n−1)). Also the connect timeout of an attempt."`
	// BackoffMax caps the exponential backoff (before jitter, so a wait may
	// reach BackoffMax·(1+Jitter)). Default 1h.
	BackoffMax time.Duration `yaml:"backoff_max" help:"Largest reconnect delay."`
	// DeadAfter is how long failures must continue, without any established
	// connection, before a relay is Dead. Default 24h.
	DeadAfter time.Duration `yaml:"dead_after" help:"A relay failing for this long is dead."`
	// DeadRetry is the spacing of attempts to a Dead relay.
	// Default 24h.
	DeadRetry time.Duration `yaml:"dead_retry" help:"A dead relay is tried once per this interval."`
	// RateLimitCooldown is how long a relay that signalled rate limiting is
	// left alone (no connection attempt, REQ or NEG-OPEN). Default 65s: a
	// typical 60s window plus 5s of margin.
	RateLimitCooldown time.Duration `yaml:"rate_limit_cooldown" help:"Pause after a rate-limited NOTICE, CLOSED or OK."`
	// StabilityPeriod is how long a connection established after failures
	// must last before the relay is Healthy again and its failure count is
	// cleared, unless it answers first (Tracker.Achieved). Default 5m.
	StabilityPeriod time.Duration `yaml:"stability_period" help:"A connection up this long resets the failure count (one that answers a request resets it at once)."`
	// ReconnectWait is the wait, spread by Jitter, before reconnecting to
	// a relay whose connection dropped after it answered (delivered
	// events, an EOSE, a NEG-MSG or an OK: Tracker.Achieved): such a drop
	// is no failure and grows no backoff, so a relay that cuts every
	// connection after a few seconds is synced at the rate it allows.
	// Default 1s.
	ReconnectWait time.Duration `yaml:"reconnect_wait" help:"Wait before reconnecting to a relay whose dropped connection had answered (events, EOSE, NEG-MSG or OK): such a drop is no failure and grows no backoff."`
	// ResumeWait replaces ReconnectWait, spread by Jitter, for a
	// connection the relay closed in order (a close frame, not going away
	// or try again later) after it delivered events to a historic sync
	// still in progress (Tracker.Delivered): the sync resumes where the
	// relay stopped, as a client reading on below the oldest event it got
	// reconnects at once. A connection cut without a close frame, or one
	// that lived ReconnectWait or longer (the engine decides), waits
	// ReconnectWait: the relay, or a proxy before it, may be in trouble,
	// and the wait is a small part of a long connection. The dial still takes its token from the request budget
	// (Pacer), and a connection that delivered nothing waits
	// ReconnectWait or its backoff as before. Default 100ms.
	ResumeWait time.Duration `yaml:"resume_wait" help:"Wait before reconnecting to a relay that closed a connection (a close frame, not going away) younger than reconnect_wait after it delivered events to a historic sync still in progress: the sync resumes where the relay stopped. Other drops, and connections cut without a close frame, wait reconnect_wait."`
	// Tick is the period of Run: time-based transitions, attempt expiry and
	// metric updates. Default 2s.
	Tick time.Duration `yaml:"tick" help:"Health and metrics tick."`
	// NaughtyPeriod is how long a relay is skipped after a hard failure
	// (DNS name not found, TLS error, not a websocket, protocol garbage),
	// where backing off by seconds would only repeat the same error.
	// Default 12h.
	NaughtyPeriod time.Duration `yaml:"naughty_period" help:"How long a misbehaving relay stays penalised."`
	// Jitter spreads each backoff uniformly over
	// [1−Jitter, 1+Jitter] times its nominal value so that
	// many sidecars do not reconnect in lockstep. 0 disables jitter; must be
	// in [0, 1). Default 0.2.
	Jitter float64 `yaml:"jitter" help:"Random fraction added to or removed from each backoff delay, in [0, 1)."`
	// DefaultSubscriptionBudget is the number of concurrent subscriptions
	// the engine may hold on a relay that announced no max_subscriptions.
	// Default 20: relays that do not publish limits often enforce small
	// ones, and exceeding them costs rejected REQs (strfry answers a NOTICE
	// that names no subscription, so the engine cannot even tell which REQ
	// failed). The engine consolidates filters, so 20 is enough for live
	// sync plus a few historic pages in flight.
	DefaultSubscriptionBudget int `yaml:"default_subscription_budget" help:"Concurrent subscriptions per relay when its NIP-11 states no max_subscriptions."`
	// LearnedTTL is how long the bounds a relay taught by refusals (filters
	// per REQ, tag values per filter, message size, subscription budget)
	// are kept across restarts, counted from the last time one went down:
	// within it a restarted sidecar builds requests that fit at once
	// instead of being refused again (a message too big closes the
	// connection). Default 7 days.
	LearnedTTL time.Duration `yaml:"learned_ttl" help:"How long the limits a relay taught by refusing requests (filters per REQ, tag values per filter, message size, subscription budget) are kept across restarts, from the last time one went down (with state.dir)."`
	// RefusalWait is how long a relay is left alone (no REQ or NEG-OPEN)
	// after a refusal that will not change by itself: "restricted:",
	// "blocked:", or "auth-required:" without a key (Tracker.Refused).
	// Default 6h; a restart (a changed configuration) asks again at once.
	RefusalWait time.Duration `yaml:"refusal_wait" help:"How long a relay that refused a read for a reason that will not change by itself (restricted:, blocked:, auth-required: without a secret key) is sent no REQ or NEG-OPEN. A restart asks again at once."`
	// RequestRate and RequestBurst are each remote relay's request budget
	// (Pacer): every REQ (fetches by id included), NEG-OPEN, AUTH and
	// dial takes a token from a bucket of RequestBurst tokens refilled at
	// RequestRate per second; a request finding none waits for one.
	// Defaults 5/s and 5,000: a first sync's burst of requests is not
	// slowed (the bench's medium world, 2,000 repositories on 10 relays,
	// sends one relay up to ~620 requests with NIP-77 and ~1,400 by REQ
	// paging; a world five times larger fits), and in the long run a
	// relay is never asked more than 5 times a second.
	RequestRate  float64 `yaml:"request_rate" help:"Requests (REQ, NEG-OPEN, AUTH) and dials per second a remote relay is sent in the long run; beyond the burst a request waits for its turn (ngit_sync_relay_requests_waiting)."`
	RequestBurst int     `yaml:"request_burst" help:"Requests and dials a remote relay may be sent at once before request_rate applies (a first sync's burst)."`
	// RefusalBackoffBase and RefusalBackoffMax are the backoff of a relay
	// refusing requests (a CLOSED or NEG-ERR of any reason, a NOTICE that
	// is an error): one request per wait goes out, the wait doubles per
	// refusal in a row up to RefusalBackoffMax (spread by Jitter), and
	// ends when a request is answered. Defaults 2s and 10m.
	RefusalBackoffBase time.Duration `yaml:"refusal_backoff_base" help:"Wait before the next request to a relay that refused one (CLOSED, NEG-ERR, an error NOTICE); doubles per refusal in a row, ends when a request is answered."`
	RefusalBackoffMax  time.Duration `yaml:"refusal_backoff_max" help:"Longest wait between requests to a relay that keeps refusing them."`

	// AttemptExpiry is how long an attempt reported by AttemptStarted may go
	// without an outcome (Connected or Failed) before the Tracker counts it
	// as a failure, so a lost report cannot park a relay forever. An attempt
	// never expires before the connection timeout (BackoffBase) has passed.
	// Default 1m.
	AttemptExpiry time.Duration `yaml:"-"`
	// MinSubscriptionBudget is the floor for a budget lowered by "too many
	// subscriptions" notices. Default 1.
	MinSubscriptionBudget int `yaml:"-"`
	// BudgetHoldoff is how long after lowering a relay's subscription budget
	// further "too many subscriptions" notices are ignored for budgeting:
	// one overflow burst produces one notice per rejected REQ and must lower
	// the budget once, not once per notice. 0 lowers on every notice.
	// Default 10s.
	BudgetHoldoff time.Duration `yaml:"-"`
}

// DefaultConfig returns the defaults documented on each Config field.
func DefaultConfig() Config {
	return Config{
		BackoffBase:               5 * time.Second,
		BackoffMax:                time.Hour,
		Jitter:                    0.2,
		AttemptExpiry:             time.Minute,
		DeadAfter:                 24 * time.Hour,
		DeadRetry:                 24 * time.Hour,
		RateLimitCooldown:         65 * time.Second,
		StabilityPeriod:           5 * time.Minute,
		ReconnectWait:             time.Second,
		ResumeWait:                100 * time.Millisecond,
		Tick:                      2 * time.Second,
		NaughtyPeriod:             12 * time.Hour,
		DefaultSubscriptionBudget: 20,
		MinSubscriptionBudget:     1,
		BudgetHoldoff:             10 * time.Second,
		LearnedTTL:                7 * 24 * time.Hour,
		RefusalWait:               6 * time.Hour,
		RequestRate:               5,
		RequestBurst:              5000,
		RefusalBackoffBase:        2 * time.Second,
		RefusalBackoffMax:         10 * time.Minute,
	}
}

// Validate reports every invalid field, each as a *setting.Error keyed by
// its YAML key; the errors wrap ErrInvalidConfig.
func (c Config) Validate() error {
	v := setting.Checks{Kind: ErrInvalidConfig}
	v.Positive("backoff_base", c.BackoffBase)
	v.Positive("backoff_max", c.BackoffMax)
	v.Compare("backoff_max", c.BackoffMax, ">=", "backoff_base", c.BackoffBase)
	v.Positive("dead_after", c.DeadAfter)
	v.Positive("dead_retry", c.DeadRetry)
	v.Positive("rate_limit_cooldown", c.RateLimitCooldown)
	v.Positive("stability_period", c.StabilityPeriod)
	v.Positive("reconnect_wait", c.ReconnectWait)
	v.Positive("resume_wait", c.ResumeWait)
	v.Compare("reconnect_wait", c.ReconnectWait, ">=", "resume_wait", c.ResumeWait)
	v.Positive("tick", c.Tick)
	v.Positive("naughty_period", c.NaughtyPeriod)
	if !(c.Jitter >= 0 && c.Jitter < 1) { // also rejects NaN
		v.Fail("jitter", "must be in [0, 1)", c.Jitter)
	}
	v.PositiveInt("default_subscription_budget", c.DefaultSubscriptionBudget)
	v.Positive("learned_ttl", c.LearnedTTL)
	v.Positive("refusal_wait", c.RefusalWait)
	if !(c.RequestRate > 0) || c.RequestRate > 1e6 { // also rejects NaN and +Inf
		v.Fail("request_rate", "must be in (0, 1000000]", c.RequestRate)
	}
	v.PositiveInt("request_burst", c.RequestBurst)
	v.Positive("refusal_backoff_base", c.RefusalBackoffBase)
	v.Positive("refusal_backoff_max", c.RefusalBackoffMax)
	v.Compare("refusal_backoff_max", c.RefusalBackoffMax, ">=", "refusal_backoff_base", c.RefusalBackoffBase)
	// Not user settings: these keep their defaults outside tests.
	v.Positive("attempt_expiry", c.AttemptExpiry)
	if c.MinSubscriptionBudget < 1 {
		v.Fail("min_subscription_budget", "must be >= 1", c.MinSubscriptionBudget)
	} else if c.DefaultSubscriptionBudget > 0 {
		v.Compare("default_subscription_budget", c.DefaultSubscriptionBudget, ">=", "min_subscription_budget", c.MinSubscriptionBudget)
	}
	v.NonNegative("budget_holdoff", c.BudgetHoldoff)
	return v.Err()
}

// jittered spreads d over [1−Jitter, 1+Jitter]·d with rnd's draw.
func (c Config) jittered(d time.Duration, rnd func() float64) time.Duration {
	return c.policy().Jittered(d, rnd())
}

// policy is the reconnect backoff: BackoffBase·2^(failures−1), capped at
// BackoffMax, spread by Jitter either way.
func (c Config) policy() backoff.Policy {
	return backoff.Policy{Base: c.BackoffBase, Max: c.BackoffMax, Jitter: c.Jitter}
}
