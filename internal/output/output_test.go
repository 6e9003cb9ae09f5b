package output

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.gguf")
	if err := os.WriteFile(in, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	folder := filepath.Join(dir, "model")
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	weights := filepath.Join(folder, "model.safetensors")
	if err := os.WriteFile(weights, []byte("w"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.gguf")
	if err := os.Link(in, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.aot")
	if err := os.WriteFile(other, []byte("o"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		out    string
		inputs []string
		force  bool
		folder bool
		want   string // "" accepts
	}{
		{filepath.Join(dir, "new.aot"), []string{in}, false, false, ""},
		{in, []string{in}, true, false, "is the input"},
		{link, []string{in}, true, false, "is the input"},
		{weights, []string{folder}, true, false, "input folder"},
		{filepath.Join(folder, "new.aot"), []string{folder}, false, false, ""},
		{folder, []string{weights}, true, true, "inside the output folder"},
		{folder, []string{folder}, true, true, "is the input"},
		{other, []string{in}, false, false, "exists"},
		{other, []string{in}, true, false, ""},
		{fifo, []string{in}, true, false, "not a regular file"},
		{"/dev/null", []string{in}, true, false, "not a regular file"},
		{folder, []string{in}, true, false, "a folder"},
		{other, []string{in}, true, true, "not a folder"},
		{filepath.Join(dir, "q"), []string{"", "missing"}, false, true, ""},
	} {
		err := Check(c.out, c.inputs, c.force, c.folder)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s from %v: %v", c.out, c.inputs, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s from %v: got %v, want %q", c.out, c.inputs, err, c.want)
		}
	}
	if err := Check(other, nil, false, false); !errors.Is(err, ErrExists) {
		t.Errorf("existing output: %v does not wrap ErrExists", err)
	}
}

func TestTrack(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, p := range []string{a, b} {
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	Track(a)
	Track(b)()
	RemoveTracked()
	if _, err := os.Stat(a); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("tracked %s is still there: %v", a, err)
	}
	if _, err := os.Stat(b); err != nil {
		t.Errorf("untracked %s was removed: %v", b, err)
	}
}
