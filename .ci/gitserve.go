//go:build ignore

// gitserve serves one bare repository over smart HTTP on 127.0.0.1 for
// .ci/image's git smoke test (the image's git fetching as purgatory does):
//
//	go build -o gitserve .ci/gitserve.go && ./gitserve
//
// It prints one line, "<clone URL> <tip of main> <unreferenced commit> <tag>",
// and serves until stdin is closed or it is signalled. The unreferenced commit
// is reachable from no ref: only a fetch by object id (protocol v2) gets it.
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/grasp-sync/grasp-sync/testkit/gitserver"
)

func main() {
	if err := serve(); err != nil {
		fmt.Fprintln(os.Stderr, "gitserve:", err)
		os.Exit(1)
	}
}

func serve() error {
	root, err := os.MkdirTemp("", "gitserve-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(root)
	srv, err := gitserver.New(root, gitserver.Options{Stderr: os.Stderr})
	if err != nil {
		return err
	}
	defer srv.Close()
	const rel = "npub1smoke/smoke.git"
	repo, err := srv.CreateRepo(rel)
	if err != nil {
		return err
	}
	if _, err := repo.Commit("main", "first", map[string]string{"README": "smoke\n"}); err != nil {
		return err
	}
	tip, err := repo.Commit("main", "second", nil)
	if err != nil {
		return err
	}
	tag, err := repo.AnnotatedTag("v1", tip, "v1")
	if err != nil {
		return err
	}
	unref, err := repo.Commit("", "unreferenced", nil)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s %s %s\n", srv.CloneURL(rel), tip, unref, tag)

	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-done:
	case <-sig:
	}
	return nil
}
