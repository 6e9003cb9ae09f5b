// Package output guards the files aotlm writes: an output never replaces
// one of its inputs, an existing one is replaced only when asked, never one
// that is not a regular file (or folder), and the temporary files that
// become outputs are removed when the process is interrupted.
package output

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// ErrExists is returned by Check for an existing output without force.
var ErrExists = errors.New("exists")

// Check decides whether out may be written from inputs. It refuses an out
// that is one of the inputs or an existing path inside an input folder (and
// an input inside an existing output folder, which replacing it removes), an
// existing out unless force (the error wraps ErrExists), and an existing
// out that is not what the writer makes: a regular file, or a folder when
// folder is set. Inputs that do not exist are ignored.
func Check(out string, inputs []string, force, folder bool) error {
	ost, err := os.Stat(out)
	exists := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("output %s: %w", out, err)
	}
	absOut, err := filepath.Abs(out)
	if err != nil {
		return fmt.Errorf("output %s: %w", out, err)
	}
	for _, in := range inputs {
		if in == "" {
			continue
		}
		ist, err := os.Stat(in)
		if err != nil {
			continue
		}
		if exists && os.SameFile(ist, ost) {
			return fmt.Errorf("output %s is the input %s: choose another output", out, in)
		}
		absIn, err := filepath.Abs(in)
		if err != nil {
			continue
		}
		if exists && ist.IsDir() && within(absOut, absIn) {
			return fmt.Errorf("output %s would replace a file of the input folder %s: choose another output", out, in)
		}
		if exists && ost.IsDir() && within(absIn, absOut) {
			return fmt.Errorf("input %s is inside the output folder %s: choose another output", in, out)
		}
	}
	if !exists {
		// a dangling symbolic link would be followed by the rename target
		if lst, err := os.Lstat(out); err == nil && lst.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("output %s is a broken symbolic link", out)
		}
		return nil
	}
	switch {
	case folder && !ost.IsDir():
		return fmt.Errorf("output %s exists and is not a folder", out)
	case !folder && !ost.Mode().IsRegular():
		what := "not a regular file"
		if ost.IsDir() {
			what = "a folder"
		}
		return fmt.Errorf("output %s exists and is %s", out, what)
	case !force:
		return fmt.Errorf("output %s %w", out, ErrExists)
	}
	return nil
}

// within reports whether path is dir or below it (both absolute).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

var (
	mu      sync.Mutex
	tracked = map[string]bool{}
)

// Track records a temporary file or folder that RemoveTracked removes when
// the process is interrupted; call the returned function once it has been
// renamed into place or removed.
func Track(path string) (untrack func()) {
	mu.Lock()
	tracked[path] = true
	mu.Unlock()
	return func() {
		mu.Lock()
		delete(tracked, path)
		mu.Unlock()
	}
}

// RemoveTracked removes every tracked temporary file and folder; the
// interrupt handler calls it before the process exits.
func RemoveTracked() {
	mu.Lock()
	defer mu.Unlock()
	for p := range tracked {
		os.RemoveAll(p)
		delete(tracked, p)
	}
}
