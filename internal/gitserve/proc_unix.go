//go:build unix

package gitserve

import (
	"os/exec"
	"syscall"
)

// killGroup makes cmd run in a process group of its own and be stopped
// with it: http-backend hands a request to git upload-pack, a child that
// holds the output pipe open after its parent is killed.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
