package output

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// CheckPlace refuses an output folder that replacing would take more than
// aotlm's own files with: the root, the home folder, the working folder or
// one of its parents, and a folder holding one of the inputs. It compares
// paths both as given (made absolute) and with symbolic links resolved.
func CheckPlace(out string, inputs []string) error {
	outs := resolved(out)
	if len(outs) == 0 {
		return fmt.Errorf("output %s: cannot resolve the path", out)
	}
	var guarded []string
	if wd, err := os.Getwd(); err == nil {
		guarded = append(guarded, resolved(wd)...)
	}
	home, _ := os.UserHomeDir()
	homes := resolved(home)
	for _, o := range outs {
		if filepath.Dir(o) == o {
			return fmt.Errorf("output %s is the root folder: choose a new folder for the output", out)
		}
		if home != "" && slices.Contains(homes, o) {
			return fmt.Errorf("output %s is the home folder: choose a new folder for the output", out)
		}
		for _, g := range guarded {
			if within(g, o) {
				return fmt.Errorf("output %s is the working folder or one of its parents: choose a new folder for the output", out)
			}
		}
		for _, in := range inputs {
			if in == "" {
				continue
			}
			for _, i := range resolved(in) {
				if within(i, o) {
					return fmt.Errorf("output %s holds the input %s: choose another output", out, in)
				}
			}
		}
	}
	return nil
}

// resolved returns p made absolute and, when it exists, with its symbolic
// links resolved.
func resolved(p string) []string {
	if p == "" {
		return nil
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil
	}
	out := []string{abs}
	if r, err := filepath.EvalSymlinks(abs); err == nil && r != abs {
		out = append(out, r)
	}
	return out
}

// ErrForeign is wrapped by the errors for an output folder that holds
// files aotlm did not write there.
var ErrForeign = errors.New("holds files aotlm did not write")

// CheckOwned refuses to replace the folder dir unless every entry in it is
// one of owned (names of regular files, as the folder's manifest lists
// them). An empty folder passes.
func CheckOwned(dir string, owned []string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("output %s: %w", dir, err)
	}
	var foreign []string
	for _, e := range ents {
		if !e.Type().IsRegular() || !slices.Contains(owned, e.Name()) {
			foreign = append(foreign, e.Name())
		}
	}
	if len(foreign) == 0 {
		return nil
	}
	more := ""
	if len(foreign) > 3 {
		more = fmt.Sprintf(" and %d more", len(foreign)-3)
		foreign = foreign[:3]
	}
	return fmt.Errorf("output %s %w (%s%s): remove them or choose another output", dir, ErrForeign, strings.Join(foreign, ", "), more)
}

// ReplaceDir puts the folder tmp in the place of out. An existing out must
// hold nothing but the files owned names (CheckOwned, checked again here):
// it is moved aside, tmp renamed into place, and the owned files removed
// with the folder that held them. A file that appears in the old folder
// meanwhile is kept, in a folder named in the error.
func ReplaceDir(tmp, out string, owned []string) error {
	if _, err := os.Lstat(out); errors.Is(err, os.ErrNotExist) {
		if err := os.Rename(tmp, out); err != nil {
			return fmt.Errorf("output: %w", err)
		}
		return nil
	}
	if err := CheckOwned(out, owned); err != nil {
		return err
	}
	c := filepath.Clean(out)
	old := filepath.Join(filepath.Dir(c), "."+filepath.Base(c)+".aotlm-old-"+strconv.Itoa(os.Getpid()))
	if err := os.Rename(out, old); err != nil {
		return fmt.Errorf("output: moving the previous %s aside: %w", out, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		if rerr := os.Rename(old, out); rerr != nil {
			return fmt.Errorf("output: %v; the previous folder is at %s", err, old)
		}
		return fmt.Errorf("output: %w", err)
	}
	for _, n := range owned {
		if err := os.Remove(filepath.Join(old, n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("output: removing the previous %s: %w", n, err)
		}
	}
	if err := os.Remove(old); err != nil {
		return fmt.Errorf("output %s was replaced, but files that appeared in the previous folder meanwhile are kept in %s: %w", out, old, err)
	}
	return nil
}
