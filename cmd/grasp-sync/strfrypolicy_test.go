package main

import (
	"strings"
	"testing"
)

// strfry-policy reads requests from stdin and writes only answers to
// stdout; its settings are run's (flags here, as GRASP_SYNC_* variables
// under strfry).
func TestStrfryPolicyCommand(t *testing.T) {
	h := newHarness(t)
	id := strings.Repeat("1", 64)
	h.env.stdin = strings.NewReader(`{"type":"new","event":{"id":"` + id + `","pubkey":"` + strings.Repeat("2", 64) +
		`","kind":30617,"created_at":1,"tags":[["d","x"],["clone","https://git.example.com/x.git"],["relays","wss://git.example.com"]]},"sourceType":"IP4"}` + "\n")
	if c := h.run("strfry-policy", "--own-relay", "ws://127.0.0.1:1", "--service-domain", "git.example.com"); c != 0 {
		t.Fatalf("exit %d, stderr %s", c, h.stderr.String())
	}
	if got, want := h.stdout.String(), `{"id":"`+id+`","action":"accept"}`+"\n"; got != want {
		t.Fatalf("stdout %q, want %q", got, want)
	}
	if !strings.Contains(h.stderr.String(), `"logger":"strfry-policy"`) {
		t.Errorf("no log on stderr: %s", h.stderr.String())
	}

	h = newHarness(t)
	h.env.stdin = strings.NewReader("")
	if c := h.run("strfry-policy", "--own-relay", "ws://127.0.0.1:1"); c != 1 {
		t.Fatalf("without a service domain: exit %d", c)
	}
	if h.stdout.String() != "" || !strings.Contains(h.stderr.String(), "service_domain (--service-domain, GRASP_SYNC_SERVICE_DOMAIN): is required by strfry-policy") {
		t.Fatalf("without a service domain: stdout %q, stderr %q", h.stdout.String(), h.stderr.String())
	}
}
