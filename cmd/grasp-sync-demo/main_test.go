package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDemoIsTheDefaultCommand(t *testing.T) {
	for _, args := range [][]string{{"x"}, {"x", "--repos", "1"}} {
		got := withDefaultCommand(args)
		if len(got) < 2 || got[1] != "demo" {
			t.Errorf("%q -> %q", args, got)
		}
	}
	for _, args := range [][]string{{"x", "bench"}, {"x", "--help"}, {"x", "-v"}} {
		if got := withDefaultCommand(args); strings.Join(got, " ") != strings.Join(args, " ") {
			t.Errorf("%q -> %q", args, got)
		}
	}
}

func TestDemoRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	var stdout, stderr bytes.Buffer
	logFile := filepath.Join(t.TempDir(), "sidecar.log")
	if code := run([]string{"grasp-sync-demo", "--repos", "2", "--timeout", (2 * time.Minute).String(), "--log", logFile}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	for _, want := range []string{"grasp-sync demo: everything runs on 127.0.0.1", "sidecar log: " + logFile} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
	log, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "INFO") || !strings.Contains(string(log), "historic sync complete") {
		t.Errorf("sidecar log:\n%s", log)
	}
}

func TestBenchErrorsAreOneLine(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"grasp-sync-demo", "bench", "--profile", "huge"}, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d", code)
	}
	want := "grasp-sync-demo: bench: unknown profile \"huge\" (want one of forge, small, medium, one-relay, large)\n"
	if got := stderr.String(); got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
}

func TestUnknownCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"grasp-sync-demo", "nope"}, &stdout, &stderr); code == 0 {
		t.Fatal("exit 0")
	}
}
