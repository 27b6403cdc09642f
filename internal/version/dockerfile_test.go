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

// The image checks signatures with libsecp256k1 (cgo), and its final stage
// installs its packages before it reads the build's identity, so that layer
// stays cached across commits. .ci/image checks the built image itself.
func TestDockerfileBuild(t *testing.T) {
	b, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, want := range []string{"CGO_ENABLED=1 ", "-tags libsecp256k1,netgo,osusergo "} {
		if !strings.Contains(s, want) {
			t.Errorf("Dockerfile does not build with %q", want)
		}
	}
	final := strings.LastIndex(s, "\nFROM ")
	if final < 0 {
		t.Fatal("Dockerfile has no FROM")
	}
	stage := s[final:]
	apt, arg := strings.Index(stage, "\nRUN apt-get"), strings.Index(stage, "\nARG VERSION")
	if apt < 0 || arg < 0 || arg < apt {
		t.Errorf("final stage: ARG VERSION (at %d) must follow RUN apt-get (at %d)", arg, apt)
	}
}
