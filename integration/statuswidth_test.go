package integration

import (
	"encoding/json"
	"fmt"
	"html"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/grasp-sync/grasp-sync/internal/httpapi"
	"github.com/grasp-sync/grasp-sync/internal/status"
	"github.com/grasp-sync/grasp-sync/testkit"
	"github.com/grasp-sync/grasp-sync/testkit/gitserver"
	"github.com/grasp-sync/grasp-sync/testkit/harness"
	"github.com/grasp-sync/grasp-sync/testkit/signed"
)

// Widths the status page is checked at: a laptop's and a phone's.
var pageWidths = []struct{ w, h int }{{1280, 900}, {390, 844}}

// wideRelays and wideIdentifiers size the wide world: more relays than a
// screen's width has room for, identifiers with long names.
const (
	wideRelays      = 12
	wideIdentifiers = 6
)

// startWideWorld starts a sidecar whose status page is as wide as pages
// get: many relays with long addresses, each failing with a long error,
// purgatory identifiers with long names whose git fetches fail with long
// errors, and a long state directory. It returns the sidecar once every relay and identifier
// shows its error.
func startWideWorld(t *testing.T) *runningSidecar {
	t.Helper()
	own := ownRelay(t)
	remote := harness.Start(t, harness.RelayOptions{Name: "remote", Negentropy: true})
	// Nothing listens on port 1: each of these fails with its address in
	// the error, a long unbroken word.
	relays := []string{own.URL(), remote.URL()}
	for i := range wideRelays {
		relays = append(relays, fmt.Sprintf("ws://127.0.0.1:1/a-relay-address-long-enough-to-need-wrapping-on-a-phone-%02d", i))
	}
	gitDir := t.TempDir()
	// A git server without the repositories: every fetch fails.
	other := gitserver.NewT(t, t.TempDir(), gitserver.Options{})
	alice := signed.NewKey()
	var anns, states []*nostr.Event
	for i := range wideIdentifiers {
		d := fmt.Sprintf("an-identifier-with-a-long-name-that-a-phone-cannot-show-on-one-line-%02d", i)
		if i == 0 {
			d = strings.Repeat("unbroken", 9) // no place to break a line
		}
		rel := alice.Npub() + "/" + d + ".git"
		if _, err := gitserver.InitBare(gitDir + "/" + rel); err != nil {
			t.Fatal(err)
		}
		anns = append(anns, alice.Announcement(d, signed.WithRelays(relays...),
			signed.WithClone("http://"+own.Addr()+"/"+rel, other.CloneURL(rel))))
		states = append(states, alice.State(d, signed.WithRef("refs/heads/main", fmt.Sprintf("%040x", i+1)), signed.WithHEAD("main")))
	}
	mustPublish(t, own, anns...)
	remote.Inject(append(anns, states...)...)

	cfg := fastConfig(own)
	cfg.GitDir = gitDir
	// The summary shows the state directory: a long word too.
	cfg.State.Dir = t.TempDir() + "/" + strings.Repeat("statedirectory", 6)
	cfg.ServiceDomain = own.Addr()
	cfg.Purgatory.SyncedDelay = 100 * time.Millisecond
	cfg.Purgatory.Loop = 50 * time.Millisecond
	cfg.Purgatory.GitTimeout = 30 * time.Second
	sc := startSidecar(t, cfg)
	testkit.WaitFor(t, syncTimeout, "every relay and identifier with its error", func() bool {
		st := sc.Status()
		failing := 0
		for _, r := range st.Relays {
			if strings.HasPrefix(r.URL, "ws://127.0.0.1:1/") && r.LastError != "" {
				failing++
			}
		}
		withErr := 0
		for _, id := range st.Purgatory.Identifiers {
			if id.LastError != "" {
				withErr++
			}
		}
		return failing == wideRelays && withErr == wideIdentifiers
	})
	return sc
}

// pageMetrics is what the measuring page reports of the status page laid
// out at one width.
type pageMetrics struct {
	// ScrollWidth and ClientWidth are the status page's document's: the
	// page overflows when the first exceeds the second.
	ScrollWidth, ClientWidth int
	Relays, Identifiers      int
	// Boxes are the scroll boxes (div.scroll): their width and their
	// content's.
	Boxes []struct{ Client, Scroll int }
	// Errors are the error cells (td.err).
	Errors []struct {
		Chars int
		// Width and Lines are the cell's content box width (px) and its
		// height in lines.
		Width, Lines float64
	}
}

// measurePage is a page of the test's, on the status page's origin, that
// loads the status page (itself script-free) in a frame of the given size
// and writes what it measures into <pre id="result"> as JSON, for
// Chromium's --dump-dom: the frame stands for a window of that size.
const measurePage = `<!DOCTYPE html>
<html><head><meta charset="utf-8"><style>body{margin:0}iframe{border:0;display:block}</style>
<script>
function measure(f) {
  const d = f.contentDocument, de = d.documentElement;
  const r = {ScrollWidth: de.scrollWidth, ClientWidth: de.clientWidth,
    Relays: d.querySelectorAll('tr.relay').length, Identifiers: d.querySelectorAll('tr.identifier').length,
    Boxes: [], Errors: []};
  for (const b of d.querySelectorAll('.scroll')) r.Boxes.push({Client: b.clientWidth, Scroll: b.scrollWidth});
  for (const td of d.querySelectorAll('td.err')) {
    const cs = getComputedStyle(td);
    const text = d.createRange();
    text.selectNodeContents(td);
    r.Errors.push({Chars: td.textContent.length,
      Width: td.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight),
      Lines: Math.round(text.getBoundingClientRect().height / parseFloat(cs.lineHeight))});
  }
  document.getElementById('result').textContent = JSON.stringify(r);
}
</script></head>
<body><pre id="result">not measured</pre>
<iframe src="/?refresh=0" width="%d" height="%d" onload="measure(this)"></iframe>
</body></html>`

var resultRE = regexp.MustCompile(`(?s)<pre id="result">(.*?)</pre>`)

// TestStatusPageAtAnyWidth lays out the status page of a sidecar with many
// relays, long errors and long identifiers in headless Chromium at a
// laptop's width (1280 px) and a phone's (390 px): the page never
// overflows (wide tables scroll in their own box), and an error cell is
// never squeezed to a few characters a line.
func TestStatusPageAtAnyWidth(t *testing.T) {
	bin := chromium(t)
	sc := startWideWorld(t)
	api := httpapi.New(httpapi.Options{Provider: sc}).Handler()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /measure", func(w http.ResponseWriter, r *http.Request) {
		var width, height int
		if _, err := fmt.Sscanf(r.URL.Query().Get("size"), "%dx%d", &width, &height); err != nil {
			http.Error(w, "size: want WxH", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, measurePage, width, height)
	})
	mux.Handle("/", api)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	st := sc.Status()

	for _, size := range pageWidths {
		dom := runChromium(t, bin, fmt.Sprintf("%s/measure?size=%dx%d", srv.URL, size.w, size.h), "--dump-dom")
		m := resultRE.FindStringSubmatch(dom)
		if m == nil {
			t.Fatalf("%d px: no result in the measuring page: %s", size.w, tail(dom, 500))
		}
		var pm pageMetrics
		if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &pm); err != nil {
			t.Fatalf("%d px: result %q: %v", size.w, m[1], err)
		}
		tallest := 0
		for i, e := range pm.Errors {
			if e.Lines > pm.Errors[tallest].Lines {
				tallest = i
			}
		}
		if len(pm.Errors) > 0 {
			e := pm.Errors[tallest]
			t.Logf("%d px: document %d/%d px, scroll boxes %v; tallest error: %d characters, %.0f px wide, %.0f lines",
				size.w, pm.ScrollWidth, pm.ClientWidth, pm.Boxes, e.Chars, e.Width, e.Lines)
		}
		for _, p := range checkWidth(size.w, pm, st) {
			t.Error(p)
		}
		if path := os.Getenv(screenshotEnv); path != "" {
			shot := fmt.Sprintf("%s-%d.png", strings.TrimSuffix(path, ".png"), size.w)
			runChromium(t, bin, srv.URL+"/?refresh=0", "--screenshot="+shot, fmt.Sprintf("--window-size=%d,%d", size.w, size.h), "--hide-scrollbars")
			t.Logf("screenshot in %s", shot)
		}
	}
}

// checkWidth judges the status page laid out width px wide.
func checkWidth(width int, pm pageMetrics, st status.Snapshot) []string {
	var problems []string
	add := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%d px: ", width)+fmt.Sprintf(format, args...))
	}
	// The page shows the wide world, or this test proves nothing.
	if pm.Relays < wideRelays || pm.Identifiers < wideIdentifiers || pm.Relays != len(st.Relays) {
		add("page lists %d relays and %d identifiers, want the sidecar's %d relays and %d identifiers",
			pm.Relays, pm.Identifiers, len(st.Relays), wideIdentifiers)
	}
	if pm.ClientWidth <= 0 || pm.ClientWidth > width {
		add("document %d px wide in a %d px window", pm.ClientWidth, width)
	}
	if pm.ScrollWidth > pm.ClientWidth {
		add("page overflows: %d px of content in %d px", pm.ScrollWidth, pm.ClientWidth)
	}
	if len(pm.Boxes) != 3 {
		add("%d scroll boxes, want one per table (3: relays, clone domains, identifiers)", len(pm.Boxes))
	}
	// An error cell is never squeezed: wrapping at words, its lines hold
	// at least 20 characters on a phone and 30 on a laptop (its 18em
	// min-width holds about 35; the page this test was written against
	// gave a relay's error a character a line at 1280 px).
	perLine := 20.0
	if width >= 1280 {
		perLine = 30
	}
	longest := 0
	for _, e := range pm.Errors {
		longest = max(longest, e.Chars)
		if want := math.Ceil(float64(e.Chars) / perLine); e.Lines > want {
			add("an error of %d characters takes %.0f lines in %.0f px, want at most %.0f", e.Chars, e.Lines, e.Width, want)
		}
	}
	if longest < 150 {
		add("the longest error has %d characters, want a long one (150 or more)", longest)
	}
	if width < 600 {
		// A phone: the relays' table is wider than the screen and scrolls
		// in its box.
		if len(pm.Boxes) > 0 && pm.Boxes[0].Scroll <= pm.Boxes[0].Client {
			add("the relays' table (%d px) fits the phone's %d px: the wide world is not wide", pm.Boxes[0].Scroll, pm.Boxes[0].Client)
		}
	}
	return problems
}
