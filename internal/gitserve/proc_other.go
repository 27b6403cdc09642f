//go:build !unix

package gitserve

import "os/exec"

// killGroup keeps exec's default: the backend alone is killed.
func killGroup(*exec.Cmd) {}
