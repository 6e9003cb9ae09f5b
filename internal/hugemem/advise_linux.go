//go:build linux

package hugemem

import "golang.org/x/sys/unix"

// advisable: Linux has transparent huge pages and MADV_HUGEPAGE.
const advisable = true

// advise asks for huge pages over b (whole huge pages of the Go heap).
func advise(b []byte) {
	if len(b) > 0 {
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	}
}
