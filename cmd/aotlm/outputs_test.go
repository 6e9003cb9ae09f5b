package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/output"
	"github.com/aotlm/aotlm/internal/testutil"
)

// subprocessEnv makes the test binary act as aotlm (or run one test action) in a
// child process, for the tests that send it signals.
const subprocessEnv = "AOTLM_TEST_SUBPROCESS"

// subprocessMain is the child's main: "aotlm" runs the command line with the
// signal handler installed; "artifact" starts an artifact, says "ready" on
// stdout and waits to be interrupted.
func subprocessMain(mode string, args []string) int {
	removeTempsOnSignal()
	switch mode {
	case "aotlm":
		return run(args, os.Stdout, os.Stderr)
	case "artifact":
		w, err := artifact.Create(args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		_ = w
		fmt.Println("ready")
		select {}
	case "folder":
		// quantize's first steps: the output's lock, then its temporary
		// folder with a file in it
		if _, err := output.Lock(args[0]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		tmp, err := output.MkdirTemp(args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		output.Track(tmp)
		if err := os.WriteFile(filepath.Join(tmp, "model.safetensors"), make([]byte, 1<<20), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Println("ready")
		select {}
	}
	return 3
}

// child starts the test binary as aotlm (mode "aotlm") or for a test action.
func child(t *testing.T, mode string, args ...string) (*exec.Cmd, *bufio.Reader, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), subprocessEnv+"="+mode)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewReader(out), &stderr
}

// exitCode waits for cmd and returns its exit code.
func exitCode(t *testing.T, cmd *exec.Cmd) int {
	t.Helper()
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func sha(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func copyTo(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCompileNeverWritesOverItsInput: -o naming the input, by the same
// path, another path, a hard link or a symbolic link, is refused with and
// without --force, and the input is unchanged.
func TestCompileNeverWritesOverItsInput(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "x.gguf")
	copyTo(t, testutil.Path(t, "models/stories260K/stories260K.gguf"), in)
	before := sha(t, in)
	if err := os.Link(in, filepath.Join(dir, "hard.gguf")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(in, filepath.Join(dir, "soft.gguf")); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{in, dir + "/./x.gguf", filepath.Join(dir, "hard.gguf"), filepath.Join(dir, "soft.gguf")} {
		for _, force := range []bool{false, true} {
			args := []string{"compile", in, "-o", out, "--ctx", "64"}
			if force {
				args = append(args, "--force")
			}
			code, _, stderr := runCLI(t, args...)
			if code != 1 || !strings.Contains(stderr, "is the input") {
				t.Errorf("%v: exit %d, %s", args, code, stderr)
			}
		}
	}
	if sha(t, in) != before {
		t.Fatal("the input changed")
	}
}

// TestCompileRefusesExistingOutput: an existing -o is replaced only with
// --force, and a named pipe or a folder is never replaced.
func TestCompileRefusesExistingOutput(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	dir := t.TempDir()
	out := filepath.Join(dir, "old.aot")
	if err := os.WriteFile(out, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "compile", src, "-o", out, "--ctx", "64")
	if code != 1 || !strings.Contains(stderr, "exists") || !strings.Contains(stderr, "--force") {
		t.Fatalf("existing output: exit %d, %s", code, stderr)
	}
	if b, _ := os.ReadFile(out); string(b) != "keep me" {
		t.Fatal("existing output was replaced without --force")
	}
	if code, _, stderr := runCLI(t, "compile", src, "-o", out, "--ctx", "64", "--force"); code != 0 {
		t.Fatalf("--force: exit %d, %s", code, stderr)
	}
	if b, _ := os.ReadFile(out); string(b) == "keep me" {
		t.Fatal("--force did not replace the output")
	}
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{fifo, dir, "/dev/null"} {
		code, _, stderr := runCLI(t, "compile", src, "-o", target, "--ctx", "64", "--force")
		if code != 1 || !strings.Contains(stderr, "is not a regular file") && !strings.Contains(stderr, "is a folder") {
			t.Errorf("-o %s: exit %d, %s", target, code, stderr)
		}
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("the named pipe was replaced: %v", err)
	}
}

// TestQuantizeNeverWritesOverItsInput: quantize -o naming its input folder
// is refused even with --force (the folder would be removed).
func TestQuantizeNeverWritesOverItsInput(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	q := filepath.Join(t.TempDir(), "q")
	if code, _, stderr := runCLI(t, "quantize", src, "-o", q, "--recipe", "w8a16"); code != 0 {
		t.Fatalf("quantize: exit %d, %s", code, stderr)
	}
	for _, args := range [][]string{
		{"quantize", q, "-o", q, "--recipe", "w8a16", "--force"},
		{"quantize", filepath.Join(q, "model.safetensors"), "-o", q, "--recipe", "w8a16", "--force"},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != 1 || !strings.Contains(stderr, "input") {
			t.Errorf("%v: exit %d, %s", args, code, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(q, "aotlm-quant.json")); err != nil {
		t.Fatalf("the input folder was damaged: %v", err)
	}
}

// tempsIn lists the hidden temporary files and folders in dir.
func tempsIn(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	return out
}

// waitFor polls until cond holds, failing after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// cleanupSignalsTested are the signals every interrupt test sends.
var cleanupSignalsTested = []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// TestInterruptedQuantizeLeavesNothing: SIGINT, SIGTERM, SIGHUP and
// SIGQUIT while a quantized folder is written remove its temporary folder
// and its lock, and the process exits with 128 plus the signal's number.
func TestInterruptedQuantizeLeavesNothing(t *testing.T) {
	for _, sig := range cleanupSignalsTested {
		dir := t.TempDir()
		cmd, out, stderr := child(t, "folder", filepath.Join(dir, "q"))
		if line, err := out.ReadString('\n'); err != nil || line != "ready\n" {
			t.Fatalf("child: %q %v %s", line, err, stderr)
		}
		if n := len(tempsIn(t, dir)); n != 2 {
			t.Fatalf("want a temporary folder and a lock while writing: %v", tempsIn(t, dir))
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, out)
		if code, want := exitCode(t, cmd), 128+int(sig); code != want {
			t.Errorf("%v: exit %d, want %d (%s)", sig, code, want, stderr)
		}
		if left := tempsIn(t, dir); len(left) != 0 {
			t.Errorf("%v left %v", sig, left)
		}
	}
}

// TestInterruptedArtifactLeavesNothing: each cleanup signal while an
// artifact (compile's output, the compile cache's entries) is being written
// remove its temporary file.
func TestInterruptedArtifactLeavesNothing(t *testing.T) {
	for _, sig := range cleanupSignalsTested {
		dir := t.TempDir()
		cmd, out, stderr := child(t, "artifact", filepath.Join(dir, "m.aot"))
		line, err := out.ReadString('\n')
		if err != nil || line != "ready\n" {
			t.Fatalf("child: %q %v %s", line, err, stderr)
		}
		if len(tempsIn(t, dir)) != 1 {
			t.Fatalf("no temporary file while writing: %v", tempsIn(t, dir))
		}
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, out)
		if code := exitCode(t, cmd); code != 128+int(sig) {
			t.Errorf("%v: exit %d", sig, code)
		}
		if left := tempsIn(t, dir); len(left) != 0 {
			t.Errorf("%v left %v", sig, left)
		}
	}
}
