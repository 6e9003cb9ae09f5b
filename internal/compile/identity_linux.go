//go:build linux

package compile

import (
	"fmt"
	"io/fs"
	"syscall"
)

// fileIdentity returns what identifies a file's content beyond its size
// and modification time: its device, inode and change time, which no
// user command can set back (unlike the modification time).
func fileIdentity(st fs.FileInfo) string {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return fmt.Sprintf("dev=%d ino=%d ctime=%d.%d", s.Dev, s.Ino, s.Ctim.Sec, s.Ctim.Nsec)
	}
	return ""
}
