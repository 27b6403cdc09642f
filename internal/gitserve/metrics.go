package gitserve

import "github.com/prometheus/client_golang/prometheus"

// Results of a request, the label of ngit_sync_git_http_requests_total.
const (
	resultServed   = "served"       // the backend answered in full
	resultPush     = "push_refused" // a push (receive-pack): 403
	resultNotFound = "not_found"    // no such repository, or a path not following the sidecar's names: 404
	resultRefused  = "refused"      // a method or query the server does not serve (dumb HTTP, …)
	resultBusy     = "busy"         // no backend slot within git_http.request_timeout, or shutting down: 503
	resultTimeout  = "timeout"      // stopped at git_http.request_timeout
	resultFailed   = "failed"       // the backend did not start, answered no headers or failed
	resultAborted  = "aborted"      // the client went away, or the server stopped it
)

var results = []string{resultServed, resultPush, resultNotFound, resultRefused, resultBusy, resultTimeout, resultFailed, resultAborted}

type metrics struct {
	requests *prometheus.CounterVec
	running  prometheus.Gauge
}

// newMetrics registers the server's metrics on reg (none when nil), every
// result at 0 from the start.
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ngit_sync_git_http_requests_total",
			Help: "Requests to the read-only git server (git_http.listen), by result: served, push_refused, not_found, refused, busy, timeout, failed, aborted.",
		}, []string{"result"}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "ngit_sync_git_http_backends_running",
			Help: "git http-backend processes the read-only git server runs now (at most git_http.max_concurrent).",
		}),
	}
	for _, r := range results {
		m.requests.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.running)
	}
	return m
}
