package version

import (
	"os"
	"strings"
	"testing"
)

// The Dockerfile injects the build's identity into this package's variables.
func TestDockerfileInjectsVersion(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	const pkg = "github.com/grasp-sync/grasp-sync/internal/version."
	for _, v := range []string{"Version=${VERSION}", "Commit=${COMMIT}", "Date=${DATE}"} {
		if !strings.Contains(string(b), "-X "+pkg+v) {
			t.Errorf("Dockerfile lacks -X %s%s", pkg, v)
		}
	}
}
