package output

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tempMark follows the output's name in the names of its temporary files
// and folders: ".NAME.aotlm-tmp-PID-RANDOM". The writer's process id in
// the name tells a stale one (its writer is gone) from one being written.
const tempMark = ".aotlm-tmp-"

// tempPrefix is the start of the names of out's temporary files.
func tempPrefix(out string) string {
	return "." + filepath.Base(filepath.Clean(out)) + tempMark
}

// CreateTemp creates the temporary file that becomes out, in out's folder,
// named so that RemoveStale and Stale recognize it.
func CreateTemp(out string) (*os.File, error) {
	return os.CreateTemp(filepath.Dir(filepath.Clean(out)), tempPrefix(out)+strconv.Itoa(os.Getpid())+"-*")
}

// MkdirTemp creates the temporary folder that becomes out, in out's
// folder, named so that RemoveStale and Stale recognize it.
func MkdirTemp(out string) (string, error) {
	return os.MkdirTemp(filepath.Dir(filepath.Clean(out)), tempPrefix(out)+strconv.Itoa(os.Getpid())+"-*")
}

// tempPID returns the process id in a temporary file's name (after
// ".NAME.aotlm-tmp-"), or false when name is not one of aotlm's.
func tempPID(name string) (int, bool) {
	if !strings.HasPrefix(name, ".") {
		return 0, false
	}
	i := strings.LastIndex(name, tempMark)
	if i < 0 {
		return 0, false
	}
	digits, _, ok := strings.Cut(name[i+len(tempMark):], "-")
	if !ok || digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, false
	}
	pid, err := strconv.Atoi(digits)
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// StaleTemp is a temporary file or folder left by an aotlm process that
// is gone.
type StaleTemp struct {
	Path string `json:"path"`
	Size int64  `json:"size"` // bytes, the files of a folder summed
}

// Stale lists the stale temporary files and folders in dir: aotlm's by
// their names, whose writing process no longer runs.
func Stale(dir string) ([]StaleTemp, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []StaleTemp
	for _, e := range ents {
		pid, ok := tempPID(e.Name())
		if !ok || alive(pid) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		out = append(out, StaleTemp{Path: p, Size: diskSize(p)})
	}
	return out, nil
}

// diskSize sums the sizes of the regular files at or below p.
func diskSize(p string) int64 {
	var n int64
	filepath.WalkDir(p, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// RemoveStale removes the temporary files and folders that earlier
// writes of out left (their process is gone), and returns how many. Call
// it with out's lock held (Lock), so that no other writer's temporary
// file is taken for a stale one.
func RemoveStale(out string) (int, error) {
	dir := filepath.Dir(filepath.Clean(out))
	prefix := tempPrefix(out)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("output %s: %w", out, err)
	}
	n := 0
	for _, e := range ents {
		pid, ok := tempPID(e.Name())
		if !ok || !strings.HasPrefix(e.Name(), prefix) || pid == os.Getpid() || alive(pid) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return n, fmt.Errorf("removing the stale temporary %s: %w", e.Name(), err)
		}
		n++
	}
	return n, nil
}
