//go:build unix

package userfile

import "syscall"

// nonBlock makes opening a named pipe return at once.
const nonBlock = syscall.O_NONBLOCK
