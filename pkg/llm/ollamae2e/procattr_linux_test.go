//go:build linux

package ollamae2e

import (
	"os/exec"
	"syscall"
)

// ownGroup puts the server in its own process group so that stopping it
// also stops the runner processes it starts, and asks the kernel to send it
// SIGTERM if the test binary dies first (a panic, a kill): the server then
// shuts its runners down instead of living on.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// killGroup kills the server's process group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
