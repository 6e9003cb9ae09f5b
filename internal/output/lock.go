package output

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aotlm/aotlm/internal/limits"
	"github.com/aotlm/aotlm/internal/userfile"
)

// ErrLocked is wrapped by Lock's error when another process writes the
// same output.
var ErrLocked = errors.New("is being written by another process")

// LockPath is the lock file of out: ".NAME.aotlm-lock" beside it.
func LockPath(out string) string {
	c := filepath.Clean(out)
	return filepath.Join(filepath.Dir(c), "."+filepath.Base(c)+".aotlm-lock")
}

// unreadableLockAge is how old a lock file without a process id must be to
// be taken for stale (its writer may be between creating and filling it).
const unreadableLockAge = 10 * time.Second

// Lock claims out for this process: it creates out's lock file (O_EXCL)
// holding the process id, and returns the function that removes it. A lock
// of a process that no longer runs is stale and replaced; one of a live
// process (this one included) is refused with an error wrapping ErrLocked.
// The lock is removed on interrupt too (Track).
func Lock(out string) (release func(), err error) {
	p := LockPath(out)
	for attempt := 0; ; attempt++ {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			_, werr := f.WriteString(strconv.Itoa(os.Getpid()) + "\n")
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				os.Remove(p)
				return nil, fmt.Errorf("output %s: lock: %w", out, werr)
			}
			untrack := Track(p)
			return func() {
				untrack()
				os.Remove(p)
			}, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("output %s: lock: %w", out, err)
		}
		holder, stale := lockHolder(p)
		if !stale || attempt > 0 {
			if holder > 0 {
				return nil, fmt.Errorf("output %s %w (process %d, lock %s)", out, ErrLocked, holder, p)
			}
			if st, err := os.Lstat(p); err == nil && !st.Mode().IsRegular() {
				return nil, fmt.Errorf("output %s %w: its lock path %s is not a regular file (remove it)", out, ErrLocked, p)
			}
			return nil, fmt.Errorf("output %s %w (lock %s)", out, ErrLocked, p)
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("output %s: removing the stale lock: %w", out, err)
		}
	}
}

// lockHolder reads the process id in the lock file p and whether the lock
// is stale: its process is gone, or it holds no id and is old.
func lockHolder(p string) (pid int, stale bool) {
	b, err := userfile.ReadFile(p, userfile.Config.Named("lock file").Limit(4<<10))
	if errors.Is(err, os.ErrNotExist) {
		return 0, true
	}
	if errors.Is(err, userfile.ErrNotRegular) || limits.IsLimit(err) {
		// not a lock aotlm wrote: never taken for a stale one
		return 0, false
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
		return pid, !alive(pid)
	}
	st, err := os.Stat(p)
	return 0, err == nil && time.Since(st.ModTime()) > unreadableLockAge
}

// Locked reports whether a live process holds out's lock.
func Locked(out string) bool {
	if _, err := os.Stat(LockPath(out)); err != nil {
		return false
	}
	_, stale := lockHolder(LockPath(out))
	return !stale
}
