package output

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckPlaceRefusesParents: an output folder that is the root, the
// home folder, the working folder or one of its parents (by any spelling:
// ".", "..", "../..", an absolute path, a symbolic link), or a folder that
// holds an input, is refused; a new folder beside them is not.
func TestCheckPlaceRefusesParents(t *testing.T) {
	base := t.TempDir()
	wd := filepath.Join(base, "a", "b", "c")
	if err := os.MkdirAll(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(base, "home")
	os.MkdirAll(home, 0o755)
	t.Setenv("HOME", home)
	t.Chdir(wd)
	link := filepath.Join(base, "link-to-a")
	if err := os.Symlink(filepath.Join(base, "a"), link); err != nil {
		t.Fatal(err)
	}
	input := filepath.Join(base, "in", "sub", "model.gguf")
	os.MkdirAll(filepath.Dir(input), 0o755)
	os.WriteFile(input, []byte("x"), 0o644)
	for out, want := range map[string]string{
		"/":                       "root",
		"/..":                     "root",
		home:                      "home",
		home + "/.":               "home",
		".":                       "working folder",
		"./":                      "working folder",
		"..":                      "working folder",
		"../..":                   "working folder",
		wd:                        "working folder",
		filepath.Join(base, "a"):  "working folder",
		link:                      "working folder",
		base:                      "working folder",
		filepath.Join(base, "in"): "holds the input",
		filepath.Dir(input):       "holds the input",
	} {
		err := CheckPlace(out, []string{input, ""})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", out, err, want)
		}
	}
	for _, out := range []string{"q", "../q", filepath.Join(base, "new"), filepath.Join(home, "q"), filepath.Join(base, "in2")} {
		if err := CheckPlace(out, []string{input}); err != nil {
			t.Errorf("%q: %v", out, err)
		}
	}
}

// TestReplaceDirKeepsForeignFiles: a folder holding a file that is not
// one of the owned names, or a subfolder, is not replaced and keeps every
// file; one holding only owned files is replaced by the new folder and
// nothing of it is left.
func TestReplaceDirKeepsForeignFiles(t *testing.T) {
	owned := []string{"aotlm-quant.json", "model.safetensors", "tokenizer.json"}
	for _, foreign := range []string{"notes.txt", ".git", "model.safetensors.bak", "sub/"} {
		dir := t.TempDir()
		out := filepath.Join(dir, "q")
		os.Mkdir(out, 0o755)
		for _, n := range owned {
			os.WriteFile(filepath.Join(out, n), []byte("old"), 0o644)
		}
		if strings.HasSuffix(foreign, "/") {
			os.Mkdir(filepath.Join(out, foreign), 0o755)
		} else {
			os.WriteFile(filepath.Join(out, foreign), []byte("mine"), 0o644)
		}
		tmp, _ := MkdirTemp(out)
		os.WriteFile(filepath.Join(tmp, "model.safetensors"), []byte("new"), 0o644)
		err := ReplaceDir(tmp, out, owned)
		if !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), strings.TrimSuffix(foreign, "/")) {
			t.Errorf("%s: %v", foreign, err)
		}
		for _, n := range append(owned, foreign) {
			if _, err := os.Stat(filepath.Join(out, n)); err != nil {
				t.Errorf("%s: %s lost: %v", foreign, n, err)
			}
		}
		if err := CheckOwned(out, owned); !errors.Is(err, ErrForeign) {
			t.Errorf("CheckOwned %s: %v", foreign, err)
		}
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "q")
	os.Mkdir(out, 0o755)
	for _, n := range owned {
		os.WriteFile(filepath.Join(out, n), []byte("old"), 0o644)
	}
	tmp, _ := MkdirTemp(out)
	os.WriteFile(filepath.Join(tmp, "model.safetensors"), []byte("new"), 0o644)
	if err := ReplaceDir(tmp, out, owned); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(out)
	if b, _ := os.ReadFile(filepath.Join(out, "model.safetensors")); len(ents) != 1 || string(b) != "new" {
		t.Errorf("replaced folder holds %v, %q", ents, b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("left beside it: %v", ents)
	}
}
