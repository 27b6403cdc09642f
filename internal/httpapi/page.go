package httpapi

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/status"
)

// DefaultPageRefresh is how often the status page at / reloads itself;
// ?refresh=SECONDS overrides it per request (0 turns it off).
const DefaultPageRefresh = 10 * time.Second

// MaxPageIdentifiers bounds the purgatory rows of the status page; the
// page says how many more there are and /status lists them all.
const MaxPageIdentifiers = 200

// pageData is what the status page template renders.
type pageData struct {
	S              status.Snapshot
	Uptime         string
	Refresh        int
	Now            time.Time
	Identifiers    []status.PurgatoryIdentifier
	MoreIdentifier int
	// ByState and ByHealth count the relays, e.g. "connected 3".
	ByState, ByHealth []string
	// PairsConfirmed and Pairs sum the relays' repositories
	// confirmed/total: relay-repository pairs, as the progress log line's
	// relay_repo_pairs_confirmed and relay_repo_pairs (a repository listed
	// on two relays counts twice; S.Repositories counts it once).
	PairsConfirmed, Pairs int
}

// countBy counts values and returns "value n" in value order.
func countBy(relays []status.Relay, key func(status.Relay) string) []string {
	n := map[string]int{}
	for _, r := range relays {
		n[key(r)]++
	}
	out := make([]string, 0, len(n))
	for k, c := range n {
		out = append(out, fmt.Sprintf("%s %d", k, c))
	}
	sort.Strings(out)
	return out
}

var pageFuncs = template.FuncMap{
	"yesno": func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	},
	"ago": func(now time.Time, t *time.Time) string {
		if t == nil || t.IsZero() {
			return "-"
		}
		return status.Round(now.Sub(*t)) + " ago"
	},
	"since": func(now, t time.Time) string { return status.Round(now.Sub(t)) },
	"until": func(now, t time.Time) string { return status.Round(t.Sub(now)) },
	"deref": func(t *time.Time) time.Time { return *t },
	"next":  status.NextAttemptText,
	"utc":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"add":   func(a, b int) int { return a + b },
	"join":  func(s []string) string { return strings.Join(s, ", ") },
}

// pageTemplate lays the page out for any width from a phone's (~390 px)
// up: the summary's values wrap inside their grid column; each table
// scrolls sideways in its own box (div.scroll) rather than widening the
// page. Error cells keep a min-width, so the automatic table layout cannot
// squeeze them to a character a line, and a max-width; their text wraps at
// words, and a word breaks only when it does not fit a line alone
// (overflow-wrap:break-word). Relay URLs and identifiers, long tokens with
// few spaces, break anywhere (overflow-wrap:anywhere) within cells that
// keep a min-width too. A relay's notes (truncation, read AUTH) share its
// last-error cell rather than take a column of their own.
var pageTemplate = template.Must(template.New("page").Funcs(pageFuncs).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
{{if .Refresh}}<meta http-equiv="refresh" content="{{.Refresh}}">{{end}}
<title>grasp-sync {{if .S.Ready}}ready{{else}}not ready{{end}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;background:#fafafa;overflow-wrap:break-word}
h1{font-size:1.4em;margin:0 0 .3em}h2{font-size:1.1em;margin:1.4em 0 .4em}
.scroll{overflow-x:auto;max-width:100%}
@media (max-width:600px){body{margin:.75em}}
table{border-collapse:collapse;background:#fff;font-size:13px}
th,td{border:1px solid #ddd;padding:.25em .4em;text-align:left;vertical-align:top}
th{background:#f0f0f0;font-size:12px}td.n{text-align:right;font-variant-numeric:tabular-nums}
td.url,td.id{min-width:10em;max-width:20em;overflow-wrap:anywhere}
td.err{min-width:18em;max-width:44em;font-size:12px}
.note{color:#555}
.ok{color:#176c2a;font-weight:600}.bad{color:#b00020;font-weight:600}.warn{color:#a35a00;font-weight:600}
.muted{color:#666}
dl{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.15em 1em;margin:0}dt{color:#555}dd{margin:0;min-width:0}
</style>
</head>
<body>
<h1>grasp-sync <span class="muted">{{.S.Version}}</span></h1>
<dl id="summary">
<dt>ready</dt><dd id="ready">{{if .S.Ready}}<span class="ok">yes</span>{{else}}<span class="bad">no</span>: {{.S.NotReady}}{{end}}</dd>
<dt>uptime</dt><dd>{{.Uptime}}</dd>
<dt>own relay</dt><dd id="own-relay">{{.S.OwnRelay.URL}}: connected {{yesno .S.OwnRelay.Connected}}, stored state read {{yesno .S.OwnRelay.SelfSubscriptionEOSE}}{{if .S.OwnRelay.TiesCut}}, <span class="bad">seconds cut: {{.S.OwnRelay.TiesCut}}</span> (more announcements or roots in one second than it returns per REQ, not read whole: those beyond are not seen){{end}}{{if .S.OwnRelay.Truncation}}<div class="note">truncation: {{.S.OwnRelay.Truncation}}</div>{{end}}</dd>
<dt>repositories</dt><dd>{{.S.Repositories}}</dd>
<dt>root events</dt><dd>{{.S.RootEvents}}</dd>
<dt>pending batches</dt><dd>{{.S.PendingBatches}}</dd>
<dt>rejected index</dt><dd>hot {{.S.Rejected.Hot}}, cold {{.S.Rejected.Cold}}</dd>
<dt>state store</dt><dd id="state">{{with .S.State}}{{if .Outcome}}{{.Outcome}}{{else}}-{{end}}{{if .Dir}}, {{.Dir}}: {{.Bytes}} bytes, {{.Events}} events{{if not .LastFlush.IsZero}}, last write {{since $.Now .LastFlush}} ago{{end}}{{end}}{{end}}</dd>
</dl>

<h2>Relays ({{len .S.Relays}})</h2>
{{if .S.Relays}}<p id="relay-counts">by state: {{join .ByState}}; by health: {{join .ByHealth}}; relay-repository pairs confirmed {{.PairsConfirmed}}/{{.Pairs}}</p>{{end}}
{{if .S.Relays}}<div class="scroll"><table id="relays">
<tr><th>relay</th><th>state</th><th>health</th><th>NIP-77</th><th>repositories<br>confirmed/<wbr>total</th><th>roots<br>confirmed/<wbr>total</th><th>live filters</th><th>batches</th><th>events<br>received (new)</th><th>failures</th><th>last connected</th><th>last error, notes</th></tr>
{{range .S.Relays}}<tr class="relay" data-relay="{{.URL}}">
<td class="url">{{.URL}}{{if .Bootstrap}} <span class="muted">(bootstrap)</span>{{end}}</td>
<td class="state {{if eq .State "connected"}}ok{{else if eq .State "disconnected"}}bad{{else}}warn{{end}}">{{.State}}</td>
<td class="health {{if eq .Health "healthy"}}ok{{else if or (eq .Health "dead") (eq .Health "disconnected")}}bad{{else}}warn{{end}}">{{.Health}}</td>
<td>{{if .Negentropy}}{{.Negentropy}}{{else}}-{{end}}</td>
<td class="n">{{.ReposConfirmed}}/{{add .ReposConfirmed .ReposPending}}</td>
<td class="n">{{.RootsConfirmed}}/{{add .RootsConfirmed .RootsPending}}</td>
<td class="n">{{.FiltersOpen}}</td><td class="n">{{.PendingBatches}}</td><td class="n">{{.EventsReceived}} ({{.EventsNew}})</td><td class="n">{{.Failures}}</td>
<td>{{ago $.Now .LastConnected}}</td>
<td class="err">{{if .LastError}}{{.LastError}}{{else}}-{{end}}{{if .Truncation}}<div class="note">truncation: {{.Truncation}}</div>{{end}}{{if .TiesCut}}<div class="note bad">seconds cut: {{.TiesCut}} (more events in one second than it returns per REQ, not read whole: not synced)</div>{{end}}{{if .ReadAuth}}<div class="note">read AUTH: {{.ReadAuth}}</div>{{end}}</td>
</tr>
{{end}}</table></div>{{else}}<p class="muted">No remote relay tracked yet.</p>{{end}}

<h2>Publisher</h2>
<dl id="publisher">
<dt>queued</dt><dd>{{.S.Publisher.Queued}}</dd>
<dt>in flight</dt><dd>{{.S.Publisher.InFlight}}</dd>
<dt>accepted</dt><dd>{{.S.Publisher.Accepted}}</dd>
<dt>duplicates</dt><dd>{{.S.Publisher.Duplicates}}</dd>
<dt>rejected</dt><dd>{{.S.Publisher.Rejected}}</dd>
</dl>

<h2>Purgatory</h2>
{{if not .S.Purgatory.Enabled}}<p id="purgatory">off (no git directory)</p>{{else}}
<p id="purgatory">events waiting for git data: {{.S.Purgatory.Events}}; identifiers in the sync queue: {{.S.Purgatory.QueueSize}}; waiting for a clone domain's request slot (not failed): <span id="waiting">{{.S.Purgatory.Waiting}}</span> (each domain: {{.S.Purgatory.DomainLimit}})</p>
{{if .S.Purgatory.Domains}}<div class="scroll"><table id="domains">
<tr><th>clone domain</th><th>identifiers waiting</th><th>requests in flight</th><th>requests in the window</th><th>next slot</th></tr>
{{range .S.Purgatory.Domains}}<tr class="domain" data-domain="{{.Domain}}">
<td>{{.Domain}}</td><td class="n">{{.Waiting}}</td><td class="n">{{.InFlight}}</td><td class="n">{{.RequestsInWindow}}</td>
<td>{{if .NextSlot}}in {{until $.Now (deref .NextSlot)}}{{else}}-{{end}}</td>
</tr>
{{end}}</table></div>{{end}}
{{if .Identifiers}}<div class="scroll"><table id="identifiers">
<tr><th>identifier</th><th>states</th><th>PRs</th><th>held for</th><th>expires in</th><th>failed attempts</th><th>next attempt</th><th>last error</th></tr>
{{range .Identifiers}}<tr class="identifier">
<td class="id">{{.Identifier}}</td><td class="n">{{.States}}</td><td class="n">{{.PRs}}</td>
<td>{{since $.Now .HeldSince}}</td><td>{{until $.Now .ExpiresAt}}</td><td class="n">{{.Attempts}}</td>
<td>{{next $.Now .}}</td>
<td class="err">{{if .LastError}}{{.LastError}}{{else}}-{{end}}</td>
</tr>
{{end}}</table></div>
{{if .MoreIdentifier}}<p class="muted">… and {{.MoreIdentifier}} more identifiers: <a href="status">/status</a> lists them all.</p>{{end}}
{{end}}{{end}}

<p class="muted">As of {{utc .Now}}{{if .Refresh}}; reloads every {{.Refresh}} s (<a href="?refresh=0">stop</a>){{end}}.
Also: <a href="status">/status</a> (JSON), <a href="metrics">/metrics</a>, <a href="readyz">/readyz</a>.</p>
</body>
</html>
`))

// page serves the status page: what `grasp-sync status` shows, as HTML
// without scripts or external assets, reloading itself.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	refresh := int(DefaultPageRefresh / time.Second)
	if v := r.URL.Query().Get("refresh"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			http.Error(w, "refresh: want a number of seconds (0 turns reloading off)", http.StatusBadRequest)
			return
		}
		refresh = n
	}
	d := pageData{S: s.snapshot(), Refresh: refresh, Now: time.Now(), Uptime: "unknown"}
	if !d.S.StartedAt.IsZero() {
		d.Uptime = d.Now.Sub(d.S.StartedAt).Round(time.Second).String()
	}
	d.ByState = countBy(d.S.Relays, func(r status.Relay) string { return r.State })
	d.ByHealth = countBy(d.S.Relays, func(r status.Relay) string { return r.Health })
	for _, r := range d.S.Relays {
		d.PairsConfirmed += r.ReposConfirmed
		d.Pairs += r.ReposConfirmed + r.ReposPending
	}
	d.Identifiers = d.S.Purgatory.Identifiers
	if len(d.Identifiers) > MaxPageIdentifiers {
		d.MoreIdentifier = len(d.Identifiers) - MaxPageIdentifiers
		d.Identifiers = d.Identifiers[:MaxPageIdentifiers]
	}
	var b bytes.Buffer
	if err := pageTemplate.Execute(&b, d); err != nil {
		s.log.Error("render status page", zap.Error(err))
		http.Error(w, "cannot render the status page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	_, _ = w.Write(b.Bytes())
}
