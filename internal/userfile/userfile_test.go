package userfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aotlm/aotlm/internal/limits"
)

// fifo makes a named pipe in a temporary folder, with no writer.
func fifo(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// fast fails the test when fn takes more than a second (a blocked open).
func fast(t *testing.T, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Second):
		t.Fatalf("%s: blocked", what)
		return nil
	}
}

// TestRefusesPipesDevicesFolders: every kind refuses a named pipe without
// a writer, the character devices that read without end, a socket and a
// folder, at once and naming the kind, the path and what it is.
func TestRefusesPipesDevicesFolders(t *testing.T) {
	kinds := []Kind{Text, Calibration, Corpus, Tokenizer, Config, Template, Image, Recipe, Model}
	sock := filepath.Join(t.TempDir(), "s")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		fifo(t, "tokenizer.json"): "named pipe",
		fifo(t, "image.png"):      "named pipe",
		"/dev/zero":               "character device",
		"/dev/urandom":            "character device",
		"/dev/null":               "character device",
		sock:                      "socket",
		t.TempDir():               "folder",
	}
	for path, want := range cases {
		if _, err := os.Stat(path); err != nil {
			continue // a device this system lacks
		}
		for _, k := range kinds {
			for name, fn := range map[string]func() error{
				"ReadFile": func() error { _, err := ReadFile(path, k); return err },
				"Open":     func() error { f, _, err := Open(path, k); closeIf(f); return err },
				"Check":    func() error { return Check(path, k) },
			} {
				err := fast(t, name+" "+path, fn)
				if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), want) ||
					!strings.Contains(err.Error(), path) || !strings.HasPrefix(err.Error(), k.Name) {
					t.Errorf("%s(%s, %s): %v", name, path, k.Name, err)
				}
			}
		}
	}
}

func closeIf(f *os.File) {
	if f != nil {
		f.Close()
	}
}

// TestSizeLimits: a file one byte over its kind's limit is refused before
// it is read, with a limit error naming the file; one at the limit is read
// whole; kinds with no limit read any size.
func TestSizeLimits(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []int64{2, 10, 4097, 1 << 16} {
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadFile(p, Kind{"corpus", n - 1}); !limits.IsLimit(err) || !strings.Contains(err.Error(), p) {
			t.Errorf("%d bytes, limit %d: %v", n, n-1, err)
		}
		if err := Check(p, Kind{"corpus", n - 1}); !limits.IsLimit(err) {
			t.Errorf("Check %d bytes, limit %d: %v", n, n-1, err)
		}
		if b, err := ReadFile(p, Kind{"corpus", n}); err != nil || int64(len(b)) != n {
			t.Errorf("%d bytes, limit %d: %d %v", n, n, len(b), err)
		}
		if b, err := ReadFile(p, Model); err != nil || int64(len(b)) != n {
			t.Errorf("%d bytes, no limit: %d %v", n, len(b), err)
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "missing"), Text); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}

// TestSymlinkToPipeRefused: a symbolic link is followed, and a link to a
// pipe or a device is refused like its target.
func TestSymlinkToPipeRefused(t *testing.T) {
	dir := t.TempDir()
	for i, target := range []string{fifo(t, "p"), "/dev/zero"} {
		l := filepath.Join(dir, "link"+string(rune('0'+i)))
		if err := os.Symlink(target, l); err != nil {
			t.Fatal(err)
		}
		err := fast(t, l, func() error { _, err := ReadFile(l, Image); return err })
		if !errors.Is(err, ErrNotRegular) {
			t.Errorf("%s -> %s: %v", l, target, err)
		}
	}
	reg := filepath.Join(dir, "r.txt")
	os.WriteFile(reg, []byte("hi"), 0o644)
	l := filepath.Join(dir, "to-reg")
	os.Symlink(reg, l)
	if b, err := ReadFile(l, Text); err != nil || string(b) != "hi" {
		t.Errorf("link to a regular file: %q %v", b, err)
	}
}

// TestCheckModel: a model may be a file or a folder, never a pipe or a
// device; a missing path is left to the opener.
func TestCheckModel(t *testing.T) {
	for _, bad := range []string{fifo(t, "model.gguf"), "/dev/zero"} {
		if err := CheckModel(bad); !errors.Is(err, ErrNotRegular) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	for _, ok := range []string{t.TempDir(), "userfile.go", "missing-file"} {
		if err := CheckModel(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// FuzzReadFile: a regular file is read whole when it is within the limit
// and refused with a limit error when over it, whatever its bytes and
// the limit.
func FuzzReadFile(f *testing.F) {
	f.Add([]byte("hello"), int64(5))
	f.Add([]byte{}, int64(1))
	f.Add([]byte("\x00\xff"), int64(1))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte, max int64) {
		if max <= 0 || max > 1<<20 {
			return
		}
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := ReadFile(p, Kind{"fuzz file", max})
		switch {
		case int64(len(data)) > max:
			if !limits.IsLimit(err) {
				t.Fatalf("%d bytes over a limit of %d: %v", len(data), max, err)
			}
		case err != nil || string(b) != string(data):
			t.Fatalf("%d bytes within %d: %d %v", len(data), max, len(b), err)
		}
	})
}
