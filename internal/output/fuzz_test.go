package output

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzTempPID: any file name either is not one of aotlm's temporary
// files or carries a positive process id that appears in it after the
// mark; the names CreateTemp makes read back.
func FuzzTempPID(f *testing.F) {
	for _, s := range []string{".m.aot.aotlm-tmp-123-456", ".q.aotlm-tmp-1-x", "m.aot", ".a.aotlm-tmp--1-2",
		".a.aotlm-tmp-99999999999999999999-1", ".x.aotlm-tmp-5.aotlm-tmp-7-1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		pid, ok := tempPID(name)
		if !ok {
			return
		}
		rest := name[strings.LastIndex(name, tempMark)+len(tempMark):]
		digits := strings.TrimLeft(rest, "0")
		if pid <= 0 || !strings.HasPrefix(name, ".") || !strings.HasPrefix(digits, strconv.Itoa(pid)+"-") {
			t.Fatalf("%q read as process %d", name, pid)
		}
	})
}

// FuzzLockHolder: whatever a lock file holds, reading it neither fails
// nor names a process id that is not positive; a lock holding this
// process's id is never stale.
func FuzzLockHolder(f *testing.F) {
	for _, s := range []string{"123\n", "", "x", "-5", "99999999999999999999", strconv.Itoa(os.Getpid())} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, content []byte) {
		p := filepath.Join(dir, "lock")
		if err := os.WriteFile(p, content, 0o644); err != nil {
			t.Fatal(err)
		}
		pid, stale := lockHolder(p)
		if pid < 0 {
			t.Fatalf("%q: process %d", content, pid)
		}
		if pid == os.Getpid() && stale {
			t.Fatalf("%q: this process's lock taken for stale", content)
		}
	})
}
