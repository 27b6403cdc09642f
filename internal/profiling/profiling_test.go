package profiling

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStartWritesBothProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu"), filepath.Join(dir, "heap")
	var report bytes.Buffer
	stop, err := Start(cpu, mem, &report)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{cpu, mem} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
	if !strings.Contains(report.String(), "peak heap in use") {
		t.Errorf("report: %q", report.String())
	}
}

func TestStartWithNothingIsANoop(t *testing.T) {
	stop, err := Start("", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestStartReportsUnwritableFile(t *testing.T) {
	if _, err := Start(filepath.Join(t.TempDir(), "missing", "cpu"), "", nil); err == nil {
		t.Fatal("no error")
	}
}
