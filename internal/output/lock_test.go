package output

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// deadPID returns the id of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("no process to reap: %v", err)
	}
	return cmd.Process.Pid
}

// TestLockRefusesASecondWriter: while a lock is held, locking the same
// output (from this process or another live one) is refused naming the
// holder; after release it can be taken again and the lock file is gone.
func TestLockRefusesASecondWriter(t *testing.T) {
	for _, name := range []string{"m.aot", "q", "with space.aot"} {
		out := filepath.Join(t.TempDir(), name)
		release, err := Lock(out)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Lock(out)
		if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), strconv.Itoa(os.Getpid())) || !strings.Contains(err.Error(), out) {
			t.Errorf("second lock: %v", err)
		}
		if !Locked(out) {
			t.Error("Locked says no while held")
		}
		release()
		if _, err := os.Stat(LockPath(out)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("lock file left: %v", err)
		}
		if Locked(out) {
			t.Error("Locked says yes after release")
		}
		r2, err := Lock(out)
		if err != nil {
			t.Fatalf("after release: %v", err)
		}
		r2()
	}
}

// TestLockConcurrent: of 16 goroutines locking one output at once,
// exactly one wins.
func TestLockConcurrent(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.aot")
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	for range 16 {
		wg.Go(func() {
			if _, err := Lock(out); err == nil {
				mu.Lock()
				wins++
				mu.Unlock()
			} else if !errors.Is(err, ErrLocked) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d writers got the lock", wins)
	}
}

// TestStaleLockIsReplaced: a lock whose process is gone, or an old one
// with no process id, is taken over; a live process's lock and a fresh
// empty one (a writer between creating and filling it) are not.
func TestStaleLockIsReplaced(t *testing.T) {
	dead := deadPID(t)
	for _, c := range []struct {
		content string
		age     time.Duration
		stale   bool
	}{
		{strconv.Itoa(dead) + "\n", 0, true},
		{"", time.Hour, true},
		{"garbage", time.Hour, true},
		{"", 0, false},
		{strconv.Itoa(os.Getppid()) + "\n", 0, false},
		{"1\n", 0, false}, // init, alive (another user's process counts)
	} {
		out := filepath.Join(t.TempDir(), "m.aot")
		if err := os.WriteFile(LockPath(out), []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-c.age)
		os.Chtimes(LockPath(out), old, old)
		release, err := Lock(out)
		if c.stale != (err == nil) {
			t.Errorf("lock %q aged %v: %v", c.content, c.age, err)
		}
		if err == nil {
			b, _ := os.ReadFile(LockPath(out))
			if strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
				t.Errorf("lock holds %q", b)
			}
			release()
		}
	}
}

// TestTrackedLockRemovedOnInterrupt: RemoveTracked (the signal handler's
// cleanup) removes a held lock.
func TestTrackedLockRemovedOnInterrupt(t *testing.T) {
	out := filepath.Join(t.TempDir(), "m.aot")
	if _, err := Lock(out); err != nil {
		t.Fatal(err)
	}
	RemoveTracked()
	if _, err := os.Stat(LockPath(out)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("lock left: %v", err)
	}
}

// TestLockPathNotAFile: a named pipe or a folder where the lock file goes
// is never read (a pipe would block) nor taken for a stale lock: Lock
// refuses at once.
func TestLockPathNotAFile(t *testing.T) {
	for _, mk := range []func(p string) error{
		func(p string) error { return syscall.Mkfifo(p, 0o644) },
		func(p string) error { return os.Mkdir(p, 0o755) },
	} {
		out := filepath.Join(t.TempDir(), "m.aot")
		if err := mk(LockPath(out)); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { _, err := Lock(out); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrLocked) {
				t.Errorf("%v", err)
			}
		case <-time.After(3 * time.Second):
			t.Fatal("Lock blocked")
		}
		if _, err := os.Lstat(LockPath(out)); err != nil {
			t.Errorf("the lock path was removed: %v", err)
		}
	}
}
