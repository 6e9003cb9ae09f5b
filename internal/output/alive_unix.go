//go:build unix

package output

import (
	"errors"
	"syscall"
)

// alive reports whether a process with id pid runs (one of another user's
// counts).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
