//go:build !unix

package agent

import "os/exec"

// ownGroup leaves cmd as it is: without process groups, cancelling it
// kills the shell alone (exec's default).
func ownGroup(*exec.Cmd) {}
