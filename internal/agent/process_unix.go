//go:build unix

package agent

import (
	"errors"
	"os/exec"
	"syscall"
)

// ownGroup runs cmd in a process group of its own, which cancelling it
// kills whole: what the command started goes with it.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return err
	}
}
