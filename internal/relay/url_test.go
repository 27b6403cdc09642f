package relay

import (
	"net/url"
	"testing"
)

// FuzzNormalizeRelayURL: the result is a ws/wss URL with a host and no
// credentials, and normalizing it again changes nothing.
func FuzzNormalizeRelayURL(f *testing.F) {
	for _, s := range []string{"wss://relay.example.com/", "WS://Relay.Example.COM:80", "ws://[::1]:443", "wss://u:p@h", "ws://h?x=1#f", "ws://h/a%2Fb/", " wss://h ", "ws://[fe80::1%25eth0]/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		norm, err := NormalizeURL(raw)
		if err != nil {
			return
		}
		checkNormalized(t, norm)
	})
}

func checkNormalized(t *testing.T, norm string) {
	t.Helper()
	again, err := NormalizeURL(norm)
	if err != nil || again != norm {
		t.Fatalf("NormalizeURL(%q) = %q, %v: not idempotent", norm, again, err)
	}
	u, err := url.Parse(norm)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.User != nil || u.Hostname() == "" {
		t.Fatalf("normalized %q is not a usable relay URL", norm)
	}
}

func TestNormalizeRelayURL(t *testing.T) {
	tests := []struct{ in, want, err string }{
		{"wss://Relay.Example.com/", "wss://relay.example.com", ""},
		{"wss://relay.example.com:443", "wss://relay.example.com", ""},
		{"ws://relay.example.com:80/path/", "ws://relay.example.com/path", ""},
		{"ws://127.0.0.1:7777", "ws://127.0.0.1:7777", ""},
		{"ws://[::1]:7777/", "ws://[::1]:7777", ""},
		{" wss://a.b ", "wss://a.b", ""},
		{"https://relay.example.com", "", "scheme"},
		{"file:///etc/passwd", "", "scheme"},
		{"wss://user:pw@relay.example.com", "", "credentials"},
		{"wss://", "", "no host"},
		{"", "", "empty"},
	}
	for _, tt := range tests {
		got, err := NormalizeURL(tt.in)
		if tt.err != "" {
			if err == nil || !contains(err.Error(), tt.err) {
				t.Errorf("%q: err %v, want containing %q", tt.in, err, tt.err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q: got %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s == sub || indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
