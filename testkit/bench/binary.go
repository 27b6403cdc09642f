package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// SidecarPackage is the import path of the grasp-sync command.
const SidecarPackage = "github.com/grasp-sync/grasp-sync/cmd/grasp-sync"

// FindBinary returns the grasp-sync executable the sidecar runs measure:
// one next to the running executable (both commands installed side by
// side), otherwise one built from source into dir with the go tool (which
// works from inside this module, as `go run ./cmd/grasp-sync-demo bench`
// does). It is always built without the race detector: it is a separate
// process being measured.
func FindBinary(ctx context.Context, dir string) (string, error) {
	if exe, err := os.Executable(); err == nil {
		next := filepath.Join(filepath.Dir(exe), "grasp-sync"+exeSuffix())
		if st, err := os.Stat(next); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 && !sameFile(exe, next) {
			return next, nil
		}
	}
	return BuildBinary(ctx, dir)
}

// BuildBinary builds the grasp-sync command into dir with the go tool.
func BuildBinary(ctx context.Context, dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
		if _, statErr := os.Stat(goTool); statErr != nil {
			return "", errors.New("bench: no grasp-sync executable: pass --binary, install grasp-sync next to this command, or run from the source tree with the go tool on PATH")
		}
	}
	bin := filepath.Join(dir, "grasp-sync"+exeSuffix())
	cmd := exec.CommandContext(ctx, goTool, "build", "-o", bin, SidecarPackage)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("bench: build grasp-sync (or pass --binary): %w\n%s", err, out)
	}
	return bin, nil
}

func exeSuffix() string {
	if runtime.GOOS == "windows" {
		return ".exe"
	}
	return ""
}

func sameFile(a, b string) bool {
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}
