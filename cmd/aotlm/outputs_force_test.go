package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/output"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/testutil"
)

// filesOf maps every file below dir to its content.
func filesOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		m[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// sameFiles fails the test when dir's files differ from before.
func sameFiles(t *testing.T, what, dir string, before map[string]string) {
	t.Helper()
	after := filesOf(t, dir)
	for p, b := range before {
		if a, ok := after[p]; !ok || a != b {
			t.Errorf("%s: %s was changed or removed", what, p)
		}
	}
}

// oneLine fails the test unless the command failed with a one-line error
// saying want.
func oneLine(t *testing.T, what string, code int, stderr, want string) {
	t.Helper()
	msg := strings.TrimSpace(stderr)
	if code != 1 || !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
		t.Errorf("%s: exit %d, want one line saying %q: %s", what, code, want, stderr)
	}
}

// TestQuantizeForceReplacesOnlyItsOwnFiles: the manifest names every file
// quantize wrote; --force replaces a folder holding those and nothing
// else, and refuses, changing nothing, a folder with any other file or
// folder in it, a folder without a manifest, and an old manifest's folder
// with a file it does not name.
func TestQuantizeForceReplacesOnlyItsOwnFiles(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	dir := t.TempDir()
	q := filepath.Join(dir, "q")
	quant := func(force bool) (int, string) {
		args := []string{"quantize", src, "-o", q, "--recipe", "w8a16"}
		if force {
			args = append(args, "--force")
		}
		code, _, stderr := runCLI(t, args...)
		return code, stderr
	}
	if code, stderr := quant(false); code != 0 {
		t.Fatalf("quantize: %s", stderr)
	}
	m, err := qmodel.ReadManifest(q)
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(q)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	files := slices.Sorted(slices.Values(m.Files))
	if !slices.Equal(names, files) {
		t.Fatalf("manifest names %v, the folder holds %v", files, names)
	}
	for _, foreign := range []string{"notes.txt", ".hidden", "model.safetensors.orig", "tokenizer.json", "keep/", "keep/deep.txt"} {
		p := filepath.Join(q, foreign)
		if strings.HasSuffix(foreign, "/") {
			os.Mkdir(p, 0o755)
		} else {
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte("not aotlm's"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before := filesOf(t, dir)
		code, stderr := quant(true)
		oneLine(t, foreign, code, stderr, "files aotlm did not write")
		if !strings.Contains(stderr, strings.Split(foreign, "/")[0]) {
			t.Errorf("%s: the error does not name it: %s", foreign, stderr)
		}
		sameFiles(t, foreign, dir, before)
		os.RemoveAll(filepath.Join(q, strings.Split(foreign, "/")[0]))
	}
	if code, stderr := quant(true); code != 0 {
		t.Fatalf("--force over its own folder: %s", stderr)
	}
	// a manifest written before "files" existed: the names quantize writes
	raw, _ := os.ReadFile(filepath.Join(q, qmodel.ManifestName))
	var obj map[string]any
	json.Unmarshal(raw, &obj)
	delete(obj, "files")
	raw, _ = json.Marshal(obj)
	os.WriteFile(filepath.Join(q, qmodel.ManifestName), raw, 0o644)
	os.WriteFile(filepath.Join(q, "readme.md"), []byte("mine"), 0o644)
	code, stderr := quant(true)
	oneLine(t, "old manifest", code, stderr, "readme.md")
	os.Remove(filepath.Join(q, "readme.md"))
	if code, stderr := quant(true); code != 0 {
		t.Fatalf("--force over an old manifest's folder: %s", stderr)
	}
	// a folder aotlm did not write, and an empty one
	other := filepath.Join(dir, "other")
	os.Mkdir(other, 0o755)
	os.WriteFile(filepath.Join(other, "model.safetensors"), []byte("mine"), 0o644)
	before := filesOf(t, other)
	code, _, stderr = runCLI(t, "quantize", src, "-o", other, "--recipe", "w8a16", "--force")
	oneLine(t, "no manifest", code, stderr, "not a quantized folder aotlm wrote")
	sameFiles(t, "no manifest", other, before)
	empty := filepath.Join(dir, "empty")
	os.Mkdir(empty, 0o755)
	if code, _, stderr := runCLI(t, "quantize", src, "-o", empty, "--recipe", "w8a16", "--force"); code != 0 {
		t.Fatalf("--force over an empty folder: %s", stderr)
	}
	for _, d := range []string{dir, q} {
		if left := tempsIn(t, d); len(left) != 0 {
			t.Errorf("left in %s: %v", d, left)
		}
	}
}

// TestQuantizeRefusesParentsAndWorkingFolder: -o naming the working
// folder or a parent of it (".", "..", "../..", its absolute path), the
// root, the home folder or a folder holding the input is refused, with or
// without --force, and no file of them changes.
func TestQuantizeRefusesParentsAndWorkingFolder(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	base := t.TempDir()
	wd := filepath.Join(base, "p", "w")
	os.MkdirAll(wd, 0o755)
	home := filepath.Join(base, "home")
	os.Mkdir(home, 0o755)
	t.Setenv("HOME", home)
	for _, f := range []string{filepath.Join(wd, "notes.txt"), filepath.Join(base, "p", "data.bin"), filepath.Join(home, ".profile")} {
		os.WriteFile(f, []byte("mine"), 0o644)
	}
	// an input inside the folder named as output
	in := filepath.Join(base, "models", "m.gguf")
	os.MkdirAll(filepath.Dir(in), 0o755)
	copyTo(t, src, in)
	t.Chdir(wd)
	before := filesOf(t, base)
	for out, want := range map[string]string{
		".":                            "working folder",
		"..":                           "working folder",
		"../..":                        "working folder",
		wd:                             "working folder",
		"/":                            "root",
		home:                           "home",
		filepath.Join(base, "models"):  "input",
		filepath.Join(base, "models/"): "input",
	} {
		for _, force := range []bool{false, true} {
			args := []string{"quantize", in, "-o", out, "--recipe", "w8a16"}
			if force {
				args = append(args, "--force")
			}
			code, _, stderr := runCLI(t, args...)
			if code != 1 || !strings.Contains(stderr, want) {
				t.Errorf("-o %s force %v: exit %d: %s", out, force, code, stderr)
			}
		}
	}
	sameFiles(t, "refused outputs", base, before)
	if after := filesOf(t, base); len(after) != len(before) {
		t.Errorf("files added: %d, were %d", len(after), len(before))
	}
}

// TestConcurrentWritersRefused: while a live process holds an output's
// lock, compile and quantize to it are refused naming the holder; a lock
// left by a process that is gone is taken over, and the write removes the
// stale temporary files of its output (which `list` counts in the compile
// cache until then).
func TestConcurrentWritersRefused(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	dir := t.TempDir()
	aot, q := filepath.Join(dir, "m.aot"), filepath.Join(dir, "q")
	for _, args := range [][]string{
		{"compile", src, "-o", aot, "--force"},
		{"quantize", src, "-o", q, "--recipe", "w8a16", "--force"},
	} {
		out := args[3]
		release, err := output.Lock(out)
		if err != nil {
			t.Fatal(err)
		}
		code, _, stderr := runCLI(t, args...)
		oneLine(t, args[0]+" locked", code, stderr, "being written by another process")
		if !strings.Contains(stderr, strconv.Itoa(os.Getpid())) {
			t.Errorf("%s: the holder is not named: %s", args[0], stderr)
		}
		release()
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%s wrote %s while it was locked", args[0], out)
		}
		// a dead writer's lock and temporaries
		cmd := exec.Command("true")
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		dead := strconv.Itoa(cmd.Process.Pid)
		os.WriteFile(output.LockPath(out), []byte(dead+"\n"), 0o644)
		tmp := filepath.Join(dir, "."+filepath.Base(out)+".aotlm-tmp-"+dead+"-1")
		os.WriteFile(tmp, make([]byte, 1000), 0o644)
		if code, _, stderr := runCLI(t, args...); code != 0 {
			t.Fatalf("%s over a stale lock: %s", args[0], stderr)
		}
		if left := tempsIn(t, dir); len(left) != 0 {
			t.Errorf("%s left %v", args[0], left)
		}
	}
}

// TestListCountsStaleTemps: `list` counts (and sizes) the temporary files
// a killed compile left in the compile cache; the next compile of the
// same model removes them.
func TestListCountsStaleTemps(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	cache := t.TempDir()
	t.Setenv(compile.CacheEnv, cache)
	t.Setenv("HF_HUB_CACHE", t.TempDir())
	if code, _, stderr := runCLI(t, "run", "-m", src, "-p", "x", "-n", "1"); code != 0 {
		t.Fatal(stderr)
	}
	_, arts, err := compile.CachedArtifacts()
	if err != nil || len(arts) != 1 {
		t.Fatalf("%v %v", arts, err)
	}
	cmd := exec.Command("true")
	cmd.Run()
	dead := strconv.Itoa(cmd.Process.Pid)
	for i, size := range []int{3000, 5000} {
		p := filepath.Join(cache, "."+arts[0].Name+".aotlm-tmp-"+dead+"-"+strconv.Itoa(i))
		os.WriteFile(p, make([]byte, size), 0o644)
	}
	code, out, _ := runCLI(t, "list", "--json")
	var l struct {
		Stale []output.StaleTemp `json:"stale_temps"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &l) != nil || len(l.Stale) != 2 || l.Stale[0].Size+l.Stale[1].Size != 8000 {
		t.Fatalf("list --json: %s", out)
	}
	if code, table, _ := runCLI(t, "list"); code != 0 || !strings.Contains(table, "2 stale temporary files (7.8 KiB)") {
		t.Errorf("list:\n%s", table)
	}
	os.Remove(filepath.Join(cache, arts[0].Name))
	if code, _, stderr := runCLI(t, "run", "-m", src, "-p", "x", "-n", "1"); code != 0 {
		t.Fatal(stderr)
	}
	if left := tempsIn(t, cache); len(left) != 0 {
		t.Errorf("the compile left %v", left)
	}
}
