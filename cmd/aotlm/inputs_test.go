package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/limits"
	"github.com/aotlm/aotlm/internal/testutil"
)

// sparse makes a file of size bytes that takes no space on disk.
func sparse(t *testing.T, name string, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

// mkfifo makes a named pipe with no writer: a plain open of it blocks.
func mkfifo(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// quickCLI runs the command line with stdin, failing the test when it
// takes over 5 seconds (a blocked open or an endless read).
func quickCLI(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	type res struct {
		code     int
		out, err string
	}
	done := make(chan res, 1)
	go func() {
		var out, errb bytes.Buffer
		code := runWithInput(args, strings.NewReader(stdin), &out, &errb)
		done <- res{code, out.String(), errb.String()}
	}()
	select {
	case r := <-done:
		return r.code, r.out, r.err
	case <-time.After(5 * time.Second):
		t.Fatalf("%v: still running after 5 s", args)
		return 0, "", ""
	}
}

// TestUserFilesMustBeRegular: every file a user names on the command line
// (prompt, messages, data, calibration text, tokenizer, image, lookup
// corpus, recipe, sensitivity text, task file) is refused at once with a
// one-line error naming it when it is a character device (/dev/zero,
// /dev/urandom, /dev/null), a named pipe without a writer, a folder where
// a file is wanted, or a regular file one byte over its kind's limit
// (sparse, so nothing is read or stored).
func TestUserFilesMustBeRegular(t *testing.T) {
	gguf := testutil.Path(t, "models/stories260K/stories260K.gguf")
	vlmDir := testutil.Path(t, "vlm/smolvlm")
	t.Setenv(compile.CacheEnv, t.TempDir())
	dir := t.TempDir()
	tpl := filepath.Join(dir, "t.jinja")
	if err := os.WriteFile(tpl, []byte("{{ messages[0].content }}"), 0o644); err != nil {
		t.Fatal(err)
	}
	type input struct {
		args  func(x string) []string
		stdin func(x string) string
		max   int64 // the kind's limit
		dirOK bool  // a folder is a valid value (a tokenizer folder)
	}
	o := func(n string) string { return filepath.Join(dir, n) }
	inputs := map[string]input{
		"prompt":   {args: func(x string) []string { return []string{"run", "-m", gguf, "-n", "1", "-f", x} }, max: limits.MaxTextFile},
		"messages": {args: func(x string) []string { return []string{"template", "-m", tpl, "--messages", x} }, max: limits.MaxTextFile},
		"ppl data": {args: func(x string) []string { return []string{"ppl", "-m", gguf, "--data", x} }, max: limits.MaxTextFile},
		"calib": {args: func(x string) []string {
			return []string{"compile", gguf, "-o", o("a.aot"), "--kv", "u8", "--calib", x}
		}, max: limits.MaxTextFile},
		"tokenizer": {args: func(x string) []string {
			return []string{"compile", gguf, "-o", o("b.aot"), "--tokenizer", x}
		}, max: limits.MaxTokenizerFile, dirOK: true},
		"run tokenizer": {args: func(x string) []string {
			return []string{"run", "-m", gguf, "-n", "1", "-p", "hi", "--tokenizer", x}
		}, max: limits.MaxTokenizerFile, dirOK: true},
		"corpus": {args: func(x string) []string {
			return []string{"run", "-m", gguf, "-n", "2", "-p", "hi", "--mode", "lookup", "--lookup-corpus", x}
		}, max: limits.MaxCorpusFile},
		"recipe": {args: func(x string) []string {
			return []string{"quantize", gguf, "-o", o("q"), "--recipe", x}
		}, max: limits.MaxRecipeFile},
		"sensitivity": {args: func(x string) []string {
			return []string{"quantize", gguf, "--report-sensitivity", x}
		}, max: limits.MaxTextFile},
		"eval data": {args: func(x string) []string {
			return []string{"eval", "-m", gguf, "--task", "lambada", "--data", x}
		}, max: limits.MaxTextFile},
		"image": {args: func(x string) []string {
			return []string{"run", "-m", vlmDir, "--tokenizer", filepath.Join(vlmDir, "text.gguf"), "-p", "hi", "-n", "1", "--image", x}
		}, max: limits.MaxImageFile},
		"chat image": {args: func(x string) []string {
			return []string{"chat", "-m", vlmDir, "--tokenizer", filepath.Join(vlmDir, "text.gguf"), "--chat-template", tpl, "-n", "1", "--json"}
		}, stdin: func(x string) string { return "/image " + x + "\n" }, max: limits.MaxImageFile},
	}
	for name, in := range inputs {
		bad := map[string]string{
			"/dev/zero":                   "character device",
			"/dev/urandom":                "character device",
			"/dev/null":                   "character device",
			mkfifo(t, "in.txt"):           "named pipe",
			sparse(t, "big", in.max+1):    "exceeds the limit",
			sparse(t, "big2", in.max*2+7): "exceeds the limit",
		}
		if !in.dirOK {
			bad[t.TempDir()] = "folder"
		}
		for path, want := range bad {
			stdin := ""
			if in.stdin != nil {
				stdin = in.stdin(path)
			}
			start := time.Now()
			code, _, stderr := quickCLI(t, stdin, in.args(path)...)
			if in.stdin != nil {
				// chat notes a bad /image and goes on to the end of its input
				if code != 0 || !strings.Contains(stderr, want) || !strings.Contains(stderr, path) {
					t.Errorf("%s %s: exit %d: %s", name, path, code, stderr)
				}
				continue
			}
			msg := strings.TrimSpace(stderr)
			if code != 1 || !strings.Contains(msg, want) || !strings.Contains(msg, path) || strings.Contains(msg, "\n") {
				t.Errorf("%s %s: exit %d, want one line saying %q: %s", name, path, code, want, stderr)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("%s %s: took %v", name, path, d)
			}
		}
	}
}

// TestSafetensorsShardPipeIsRefused: a Hugging Face folder whose weights
// file, or one shard of an index, is a named pipe is refused at once.
func TestSafetensorsShardPipeIsRefused(t *testing.T) {
	src := testutil.Path(t, "models/wp-llama")
	for _, layout := range []string{"single", "sharded"} {
		dir := t.TempDir()
		for _, f := range []string{"config.json", "tokenizer.model"} {
			copyTo(t, filepath.Join(src, f), filepath.Join(dir, f))
		}
		fifo := filepath.Join(dir, "model.safetensors")
		if layout == "sharded" {
			copyTo(t, filepath.Join(src, "model.safetensors"), filepath.Join(dir, "model-00001-of-00002.safetensors"))
			idx := `{"weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors", "lm_head.weight": "model-00002-of-00002.safetensors"}}`
			if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(idx), 0o644); err != nil {
				t.Fatal(err)
			}
			fifo = filepath.Join(dir, "model-00002-of-00002.safetensors")
		}
		if err := syscall.Mkfifo(fifo, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"compile", dir, "-o", filepath.Join(t.TempDir(), "m.aot")},
			{"quantize", dir, "-o", filepath.Join(t.TempDir(), "q")},
		} {
			code, _, stderr := quickCLI(t, "", args...)
			if code != 1 || !strings.Contains(stderr, "named pipe") || !strings.Contains(stderr, filepath.Base(fifo)) {
				t.Errorf("%s %v: exit %d: %s", layout, args[0], code, stderr)
			}
		}
	}
}
