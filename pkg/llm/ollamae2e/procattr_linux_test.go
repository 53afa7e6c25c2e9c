//go:build unix

package ollamae2e

import (
	"os/exec"
	"syscall"
)

// ownGroup puts the server in its own process group so that stopping it
// also stops the runner processes it starts.
func ownGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills the server's process group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
