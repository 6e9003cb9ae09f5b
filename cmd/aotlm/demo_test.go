package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/demo"
	"github.com/aotlm/aotlm/internal/kernel"
)

// storyStart is llama2.c's documented greedy story for stories260K
// (llama2.c doc/stories260K.md: "Once upon a time, there was a little girl
// named Lily. ..."), as far as 40 tokens after the prompt reach.
const storyStart = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball."

// TestDemoModelWithoutTestData is the first five minutes of a stranger: the
// built binary, run from an empty folder with no test data anywhere
// (AOTLM_TESTDATA names an empty folder) and a fresh cache, with no -m,
// tells llama2.c's story on stdout; stderr holds the note naming the demo
// model and how to use a real one, and the statistics line.
func TestDemoModelWithoutTestData(t *testing.T) {
	bin := aotlmBinary(t)
	dir := t.TempDir()
	empty := filepath.Join(dir, "no-testdata")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "-p", "Once upon a time", "-n", "40", "--temp", "0")
	cmd.Dir = empty
	cmd.Env = append(os.Environ(), "AOTLM_TESTDATA="+empty, compile.CacheEnv+"="+filepath.Join(dir, "cache"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	if stdout.String() != storyStart+"\n" {
		t.Errorf("stdout %q, want %q", stdout.String(), storyStart+"\n")
	}
	lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "stories260K") || !strings.Contains(lines[0], "-m <model file, folder or org/name>") ||
		!strings.HasPrefix(lines[1], "prompt 5 tokens") {
		t.Errorf("stderr %q: want the demo note then the statistics", stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "cache", "demo", demo.FileName())); err != nil {
		t.Errorf("the demo model is not in the cache: %v", err)
	}
}

// TestRunDemoOutput: with stdout and stderr on one stream (a terminal
// shows them so), the note comes first, the statistics start on a line of
// their own after the streamed text, and no color code appears.
func TestRunDemoOutput(t *testing.T) {
	var both bytes.Buffer
	if code := run([]string{"run", "-p", "Once upon a time", "-n", "40", "--temp", "0"}, &both, &both); code != 0 {
		t.Fatalf("exit %d: %s", code, both.String())
	}
	lines := strings.Split(both.String(), "\n")
	if len(lines) != 4 || lines[3] != "" {
		t.Fatalf("output %q: want a note, the text and the statistics, one line each", both.String())
	}
	if !strings.HasPrefix(lines[0], "aotlm: ") || !strings.Contains(lines[0], demo.Name) {
		t.Errorf("note %q", lines[0])
	}
	if lines[1] != storyStart {
		t.Errorf("text %q, want %q", lines[1], storyStart)
	}
	if !strings.HasPrefix(lines[2], "prompt 5 tokens") || !strings.Contains(lines[2], "generated 40 tokens") {
		t.Errorf("statistics %q", lines[2])
	}
	if strings.Contains(both.String(), "\x1b") {
		t.Errorf("escape codes in output that is not a terminal: %q", both.String())
	}
}

// TestRunQuiet: --quiet prints the generated text only.
func TestRunQuiet(t *testing.T) {
	code, stdout, stderr := runCLI(t, "run", "-p", "Once upon a time", "-n", "40", "--temp", "0", "--quiet")
	if code != 0 || stdout != storyStart+"\n" || stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestLineTracker: an unfinished line is ended once, a finished one (or no
// output) gets nothing.
func TestLineTracker(t *testing.T) {
	for _, c := range []struct {
		writes []string
		want   string
	}{
		{nil, ""},
		{[]string{"Once", " upon"}, "Once upon\n"},
		{[]string{"a line\n"}, "a line\n"},
		{[]string{"a\n", "b"}, "a\nb\n"},
		{[]string{"a", ""}, "a\n"},
	} {
		var b bytes.Buffer
		w := &lineTracker{w: &b}
		for _, s := range c.writes {
			w.Write([]byte(s))
		}
		w.endLine()
		w.endLine()
		if b.String() != c.want {
			t.Errorf("%q: wrote %q, want %q", c.writes, b.String(), c.want)
		}
	}
}

// TestBenchDemoModel: bench without -m compiles the demo model once and
// measures it.
func TestBenchDemoModel(t *testing.T) {
	t.Setenv(compile.CacheEnv, t.TempDir())
	code, stdout, stderr := runCLI(t, "bench", "-p", "16", "-n", "4", "-r", "1", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Architecture string `json:"architecture"`
		Tests        []struct {
			Name string  `json:"name"`
			TokS float64 `json:"tok_s"`
		} `json:"tests"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v: %q", err, stdout)
	}
	if rep.Architecture != "llama" || len(rep.Tests) != 2 || rep.Tests[0].TokS <= 0 {
		t.Errorf("report %+v", rep)
	}
	if !strings.Contains(stderr, demo.Name) || strings.Contains(stdout+stderr, "\x1b") {
		t.Errorf("stderr %q: want the demo note, no escape codes", stderr)
	}
}

// TestDemoModelCacheError: an unusable cache folder is one error line
// naming the demo model.
func TestDemoModelCacheError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(compile.CacheEnv, file)
	for _, args := range [][]string{{"run", "-p", "x"}, {"bench"}} {
		code, stdout, stderr := runCLI(t, args...)
		if code != 1 || stdout != "" || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "demo model") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}

// TestVersionKernels: version names the Go version and the kernels chosen
// for this CPU, in text and JSON.
func TestVersionKernels(t *testing.T) {
	code, stdout, _ := runCLI(t, "version")
	want := "kernels: " + runtime.GOARCH + ": " + kernel.Active() + "\n"
	if code != 0 || !strings.Contains(stdout, want) || !strings.Contains(stdout, runtime.Version()) {
		t.Fatalf("version: exit %d, %q; want %q and %s", code, stdout, want, runtime.Version())
	}
	_, stdout, _ = runCLI(t, "version", "--json")
	var info map[string]string
	if err := json.Unmarshal([]byte(stdout), &info); err != nil || info["kernels"] != kernel.Active() || info["go"] != runtime.Version() {
		t.Fatalf("version --json: %q (%v)", stdout, err)
	}
}

// TestDemoModelBinarySize: the demo model costs the binary its own size
// and no more than a few KB beside (measured against a build with the
// nodemo tag, which leaves it out).
func TestDemoModelBinarySize(t *testing.T) {
	with := aotlmBinary(t)
	without := filepath.Join(t.TempDir(), "aotlm-nodemo")
	if out, err := exec.Command("go", "build", "-tags", "nodemo", "-o", without, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags nodemo: %v\n%s", err, out)
	}
	a, err := os.Stat(with)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.Stat(without)
	if err != nil {
		t.Fatal(err)
	}
	model := int64(len(demo.GGUF()))
	grow := a.Size() - b.Size()
	t.Logf("binary %d bytes, %d without the demo model: %+d (the model is %d)", a.Size(), b.Size(), grow, model)
	if grow > model+8<<10 || grow < model/2 {
		t.Errorf("the demo model adds %d bytes to the binary; the model is %d", grow, model)
	}
	out, err := exec.Command(without, "run", "-p", "x").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "does not include") {
		t.Errorf("a nodemo build without -m: %v, %q", err, out)
	}
}
