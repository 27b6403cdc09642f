package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/grasp-sync/grasp-sync/internal/config"
	"github.com/grasp-sync/grasp-sync/internal/ingest"
	"github.com/grasp-sync/grasp-sync/internal/status"
	"github.com/grasp-sync/grasp-sync/testkit"
)

// syncBuffer is a bytes.Buffer safe for the logger and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// fakeEngine stands in for the sidecar.
type fakeEngine struct {
	cfg *config.Config
	// ignoreCancel makes Run wait for release instead of ctx.
	ignoreCancel bool
	release      chan struct{}
	runErr       error
	started      chan struct{}
	cancelled    atomic.Bool
}

var _ Engine = (*fakeEngine)(nil)

func (f *fakeEngine) Run(ctx context.Context) error {
	close(f.started)
	if f.runErr != nil {
		return f.runErr
	}
	if f.ignoreCancel {
		<-f.release
		return nil
	}
	<-ctx.Done()
	f.cancelled.Store(true)
	return ctx.Err()
}

func (f *fakeEngine) Status() status.Snapshot {
	return status.Snapshot{Version: "fake", OwnRelay: status.OwnRelay{URL: f.cfg.OwnRelay}}
}

func (f *fakeEngine) Ready() bool { return false }

type harness struct {
	env     *env
	stdout  *syncBuffer
	stderr  *syncBuffer
	signals chan os.Signal
	engine  *fakeEngine
	exits   chan int
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	// run sets the process's GOMAXPROCS (cpu.max_procs): the tests after
	// it run at the number they started with.
	procs := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(procs) })
	// So do the memory limit (memory.limit_mib) and GOGC
	// (memory.gc_headroom_mib).
	limit := debug.SetMemoryLimit(-1) // a negative value only reads it
	gcPercent := debug.SetGCPercent(100)
	debug.SetGCPercent(gcPercent)
	t.Cleanup(func() {
		debug.SetMemoryLimit(limit)
		debug.SetGCPercent(gcPercent)
	})
	h := &harness{
		stdout:  &syncBuffer{},
		stderr:  &syncBuffer{},
		signals: make(chan os.Signal, 2),
		exits:   make(chan int, 4),
		engine:  &fakeEngine{release: make(chan struct{}), started: make(chan struct{})},
	}
	h.env = &env{
		stdout: h.stdout,
		stderr: h.stderr,
		newEngine: func(cfg *config.Config, _ *zap.Logger, reg prometheus.Registerer) (Engine, error) {
			h.engine.cfg = cfg
			return h.engine, nil
		},
		notify: func() (<-chan os.Signal, func()) { return h.signals, func() {} },
		exit:   func(code int) { h.exits <- code },
		// Not the process's: CI exports GRASP_SYNC_REQUIRE_* for the tests,
		// which the commands would warn about as unknown.
		environment: []string{},
	}
	return h
}

// engineStarted tells whether run got as far as starting the engine.
func (h *harness) engineStarted() bool {
	select {
	case <-h.engine.started:
		return true
	default:
		return false
	}
}

func (h *harness) run(args ...string) int {
	return h.env.main(append([]string{"grasp-sync"}, args...))
}

// freeAddr returns a loopback address nobody listens on (at the time).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func httpGet(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestRunServesAndShutsDownOnSignal(t *testing.T) {
	h := newHarness(t)
	addr := freeAddr(t)
	const key = "67dea2ed018072d675f5415ecfaed7d2597555e202d85b3d65ea4e58d2d92ffa"
	t.Setenv(config.EnvAuthKey, key)
	code := make(chan int, 1)
	go func() {
		code <- h.run("run", "--own-relay", "ws://own.test:7777", "--listen", addr, "--log.level", "debug")
	}()

	<-h.engine.started
	base := "http://" + addr
	testkit.WaitFor(t, 10*time.Second, "/healthz", func() bool { c, _, err := httpGet(base + "/healthz"); return err == nil && c == 200 })
	if c, body, _ := httpGet(base + "/readyz"); c != 503 || !strings.Contains(body, "own relay ws://own.test:7777 not connected") {
		t.Errorf("/readyz: %d %q", c, body)
	}
	if c, body, _ := httpGet(base + "/status"); c != 200 || !strings.Contains(body, `"version": "fake"`) {
		t.Errorf("/status: %d %q", c, body)
	}
	_, metrics, _ := httpGet(base + "/metrics")
	for _, m := range []string{"ngit_sync_build_info{", "go_goroutines ", "process_start_time_seconds "} {
		if !strings.Contains(metrics, m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	if h.engine.cfg.Auth.Key.Hex() != key {
		t.Error("engine did not receive the key")
	}

	h.signals <- syscall.SIGTERM
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit code %d, stderr:\n%s", c, h.stderr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after SIGTERM")
	}
	if !h.engine.cancelled.Load() {
		t.Error("engine context was not cancelled")
	}
	if _, _, err := httpGet(base + "/healthz"); err == nil {
		t.Error("HTTP server still answering after run returned")
	}
	logs := h.stderr.String()
	if !strings.Contains(logs, `"msg":"signal received, shutting down`) || !strings.Contains(logs, `"msg":"stopped"`) {
		t.Errorf("logs lack the shutdown lines:\n%s", logs)
	}
	if strings.Contains(logs, key) || strings.Contains(logs, key[:16]) {
		t.Error("the secret key appears in the logs")
	}
	if !strings.Contains(logs, `"auth":{"key":"[redacted]"`) {
		t.Errorf("debug configuration log lacks the redacted key:\n%s", logs)
	}
	select {
	case c := <-h.exits:
		t.Errorf("exit(%d) called on a clean shutdown", c)
	default:
	}
}

func TestRunSecondSignalExitsAtOnce(t *testing.T) {
	h := newHarness(t)
	h.engine.ignoreCancel = true
	code := make(chan int, 1)
	go func() {
		code <- h.run("--own-relay", "ws://own.test", "--listen", "127.0.0.1:0", "--shutdown-grace", "1h")
	}()
	<-h.engine.started
	h.signals <- syscall.SIGTERM
	h.signals <- syscall.SIGINT
	select {
	case c := <-h.exits:
		if c != 1 {
			t.Errorf("exit(%d), want exit(1)", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("second signal did not exit")
	}
	close(h.engine.release) // a real exit never returns; let the fake finish
	<-code
	if !strings.Contains(h.stderr.String(), "second signal, exiting immediately") {
		t.Errorf("no log line for the second signal:\n%s", h.stderr)
	}
}

func TestRunStuckShutdownIsAbandoned(t *testing.T) {
	h := newHarness(t)
	h.engine.ignoreCancel = true
	code := make(chan int, 1)
	go func() {
		code <- h.run("--own-relay", "ws://own.test", "--listen", "127.0.0.1:0", "--shutdown-grace", "20ms")
	}()
	<-h.engine.started
	h.signals <- syscall.SIGTERM
	select {
	case c := <-h.exits:
		if c != 1 {
			t.Errorf("exit(%d), want exit(1)", c)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stuck shutdown was not abandoned")
	}
	close(h.engine.release)
	<-code
}

func TestRunEngineErrorExits1(t *testing.T) {
	h := newHarness(t)
	h.engine.runErr = errors.New("own relay refused us")
	if c := h.run("--own-relay", "ws://own.test", "--listen", "127.0.0.1:0"); c != 1 {
		t.Fatalf("exit code %d", c)
	}
	if got := h.stderr.String(); !strings.HasSuffix(got, "grasp-sync: sidecar: own relay refused us\n") {
		t.Errorf("stderr: %q", got)
	}
}

func TestRunRefusesInvalidConfig(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, "grasp-sync: own_relay (--own-relay, GRASP_SYNC_OWN_RELAY): is required, got \"\"\n"},
		{[]string{"run", "--own-relay", "ws://x", "--sync.batch-window", "0s"}, "grasp-sync: sync.batch_window (--sync.batch-window, GRASP_SYNC_SYNC_BATCH_WINDOW): must be > 0, got \"0s\"\n"},
		{[]string{"--own-relay", "http://x", "--log.level", "loud"},
			"grasp-sync: own_relay (--own-relay, GRASP_SYNC_OWN_RELAY): must be a ws:// or wss:// URL, got \"http://x\"\n" +
				"grasp-sync: log.level (--log.level, GRASP_SYNC_LOG_LEVEL): must be one of debug, info, warn, error, got \"loud\"\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			h := newHarness(t)
			if c := h.run(tt.args...); c != 1 {
				t.Errorf("exit code %d", c)
			}
			if got := h.stderr.String(); got != tt.want {
				t.Errorf("stderr %q, want %q", got, tt.want)
			}
			if h.engineStarted() {
				t.Error("engine started with an invalid configuration")
			}
		})
	}
}

// A value of the wrong type in the configuration file is named by its
// line, YAML key, flag and environment variable.
func TestRunNamesTheSettingOfABadFileValue(t *testing.T) {
	path := t.TempDir() + "/grasp-sync.yml"
	if err := os.WriteFile(path, []byte("own_relay: ws://x\nsync:\n  batch_window: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	if c := h.run("--config", path); c != 1 {
		t.Errorf("exit code %d", c)
	}
	want := "grasp-sync: " + path + ": config file: line 3: sync.batch_window (--sync.batch-window, GRASP_SYNC_SYNC_BATCH_WINDOW): cannot unmarshal !!int `2` into time.Duration\n"
	if got := h.stderr.String(); got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
}

func TestRunReportsBusyListenAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	h := newHarness(t)
	if c := h.run("--own-relay", "ws://x", "--listen", ln.Addr().String()); c != 1 {
		t.Fatalf("exit code %d", c)
	}
	if got := h.stderr.String(); !strings.Contains(got, "grasp-sync: httpapi: listen "+ln.Addr().String()) {
		t.Errorf("stderr: %q", got)
	}
}

func TestDefaultCommandIsRun(t *testing.T) {
	h := newHarness(t)
	tests := map[string][]string{
		"":                   {"grasp-sync", "run"},
		"--own-relay ws://x": {"grasp-sync", "run", "--own-relay", "ws://x"},
		"check --timeout 1s": {"grasp-sync", "check", "--timeout", "1s"},
		"--help":             {"grasp-sync", "--help"},
		"version":            {"grasp-sync", "version"},
	}
	for in, want := range tests {
		args := append([]string{"grasp-sync"}, strings.Fields(in)...)
		got := h.env.withDefaultCommand(args)
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%q: got %v, want %v", in, got, want)
		}
	}
}

func TestUnknownCommand(t *testing.T) {
	for word, want := range map[string]string{
		"bogus": `grasp-sync: unknown command "bogus"; see grasp-sync --help` + "\n",
		"runn":  `grasp-sync: unknown command "runn" (did you mean run?); see grasp-sync --help` + "\n",
		"chek":  `grasp-sync: unknown command "chek" (did you mean check?); see grasp-sync --help` + "\n",
	} {
		h := newHarness(t)
		if c := h.run(word); c != 1 {
			t.Errorf("%s: exit %d", word, c)
		}
		if got := h.stderr.String() + h.stdout.String(); got != want {
			t.Errorf("%s: output %q, want %q", word, got, want)
		}
	}
}

func TestVersionCommand(t *testing.T) {
	h := newHarness(t)
	if c := h.run("version"); c != 0 {
		t.Fatalf("exit %d: %s", c, h.stderr)
	}
	out := h.stdout.String()
	// The signature backend is the one this build checks signatures with:
	// pure Go in a plain build, libsecp256k1 with -tags libsecp256k1 (the
	// container image; .ci/image checks its binary says so).
	for _, want := range []string{"grasp-sync dev\n", "commit:", "built:", "go version: go1.", "\nsignatures: " + ingest.SignatureBackend + "\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("version output lacks %q:\n%s", want, out)
		}
	}
}

func TestHelpListsEnvTwins(t *testing.T) {
	h := newHarness(t)
	if c := h.run("run", "--help"); c != 0 {
		t.Fatalf("exit %d", c)
	}
	out := h.stdout.String()
	for _, want := range []string{"--own-relay", "$GRASP_SYNC_OWN_RELAY", "--sync.batch-window", "$GRASP_SYNC_SYNC_BATCH_WINDOW", "--dial.allow"} {
		if !strings.Contains(out, want) {
			t.Errorf("run --help lacks %s", want)
		}
	}
}
