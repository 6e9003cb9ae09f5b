package output

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// TestStaleTemps: temporary files and folders of a process that is gone
// are stale and removed by the next write of the same output; a live
// writer's, another output's, and files that only look alike are kept.
func TestStaleTemps(t *testing.T) {
	dir := t.TempDir()
	dead := strconv.Itoa(deadPID(t))
	live := strconv.Itoa(os.Getppid())
	files := map[string]bool{ // name: removed by RemoveStale(dir/m.aot)
		".m.aot.aotlm-tmp-" + dead + "-123":   true,
		".m.aot.aotlm-tmp-" + dead + "-dir":   true,
		".m.aot.aotlm-tmp-" + live + "-456":   false,
		".n.aot.aotlm-tmp-" + dead + "-789":   false, // another output
		"m.aot.aotlm-tmp-" + dead + "-1":      false, // not hidden
		".m.aot.aotlm-tmp-x-1":                false, // no process id
		".m.aot.aotlm-tmp-" + dead:            false, // no random part
		".m.aot.tmp-" + dead + "-1":           false,
		"notes.txt":                           false,
		".m.aot.aotlm-tmp-" + dead + "-9.txt": true,
	}
	for name := range files {
		p := filepath.Join(dir, name)
		if name == ".m.aot.aotlm-tmp-"+dead+"-dir" {
			if err := os.MkdirAll(filepath.Join(p, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			p = filepath.Join(p, "sub", "model.safetensors")
		}
		if err := os.WriteFile(p, make([]byte, 100), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stale, err := Stale(dir)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, s := range stale {
		size += s.Size
	}
	// Stale counts every output's: the three of m.aot and n.aot's one
	if len(stale) != 4 || size != 400 {
		t.Errorf("Stale: %d files of %d bytes, want 4 of 400: %v", len(stale), size, stale)
	}
	n, err := RemoveStale(filepath.Join(dir, "m.aot"))
	if err != nil || n != 3 {
		t.Fatalf("RemoveStale: %d, %v; want 3", n, err)
	}
	for name, removed := range files {
		_, err := os.Lstat(filepath.Join(dir, name))
		if removed != os.IsNotExist(err) {
			t.Errorf("%s: removed %v, want %v", name, os.IsNotExist(err), removed)
		}
	}
}

// TestTempNamesAreRecognized: CreateTemp and MkdirTemp name their files
// so that tempPID reads this process's id back, for any output name.
func TestTempNamesAreRecognized(t *testing.T) {
	for _, name := range []string{"m.aot", "q", "a-b-c", ".hidden", "x.aotlm-tmp-5"} {
		out := filepath.Join(t.TempDir(), name)
		f, err := CreateTemp(out)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		d, err := MkdirTemp(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{f.Name(), d} {
			if pid, ok := tempPID(filepath.Base(p)); !ok || pid != os.Getpid() {
				t.Errorf("%s: %d %v", p, pid, ok)
			}
		}
		// a live writer's temporaries are not stale
		if st, _ := Stale(filepath.Dir(out)); slices.ContainsFunc(st, func(s StaleTemp) bool { return s.Path == d }) {
			t.Errorf("%s taken for stale", d)
		}
	}
}
