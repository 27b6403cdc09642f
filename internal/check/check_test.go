package check

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/grasp-sync/grasp-sync/internal/config"
)

// The NIP-11 document is read with relay.ParseLimits, which tolerates the
// odd values relays publish; a missing limitation object is "(not stated)".
func TestDescribeInfo(t *testing.T) {
	for _, tt := range []struct {
		name, doc string
		want      []string
	}{
		{"odd limits", `{"name":"r","supported_nips":["11",77],"limitation":{"max_limit":"500","max_message_length":1e6,"auth_required":true}}`,
			[]string{"max_subscriptions=0 max_filters=0 max_limit=500 max_message_length=1000000 auth_required=true restricted_writes=false",
				"supported_nips    11, 77", "requires NIP-42 auth but no key", "max_message_length 1000000 is below"}},
		{"no limitation", `{"software":"strfry"}`,
			[]string{`"(no name)", software strfry`, "limitation        (not stated)", "supported_nips    (not stated)", "supported_grasps  (none stated)"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = w.Write([]byte(tt.doc))
			}))
			defer srv.Close()
			info, err := fetchInfo(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"))
			if err != nil {
				t.Fatal(err)
			}
			cfg := &config.Config{}
			cfg.Limits.MaxEventBytes = 2 << 20
			rep := &Report{}
			describeInfo(rep, info, cfg)
			var out bytes.Buffer
			if err := rep.Print(&out); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("report lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}

func TestFetchInfoRejectsNonJSON(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("<html>"))
	}))
	defer srv.Close()
	_, err := fetchInfo(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"))
	if err == nil || !strings.HasPrefix(err.Error(), "not a NIP-11 JSON document") {
		t.Fatalf("err %v", err)
	}
}
