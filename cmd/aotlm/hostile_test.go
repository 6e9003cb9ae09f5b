package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/limits"
	"github.com/aotlm/aotlm/internal/testutil"
)

// rewriteGGUF writes a copy of stories260K.gguf whose metadata edit
// changes, and returns its path.
func rewriteGGUF(t *testing.T, edit func(kv []gguf.KV) []gguf.KV) string {
	t.Helper()
	f, err := gguf.Open(testutil.Path(t, "models/stories260K/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []gguf.WriteTensor
	for _, ti := range f.Tensors() {
		d, err := f.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, gguf.WriteTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: d})
	}
	out := filepath.Join(t.TempDir(), "edited.gguf")
	w, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.Write(w, edit(f.KVs()), ts); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// setKV replaces (or adds) key's value.
func setKV(kv []gguf.KV, key string, v any) []gguf.KV {
	for i := range kv {
		if kv[i].Key == key {
			kv[i].Value = v
			return kv
		}
	}
	return append(kv, gguf.KV{Key: key, Value: v})
}

// TestCompileRefusesAKVCacheLargerThanMemory: a GGUF claiming a context of
// 16777216 positions makes compile --ctx 0 size a KV cache of 40 GiB;
// compile refuses it with the size, the memory available and the flag that
// lowers it, instead of writing an artifact no session can allocate. The
// memory is capped at 1 GiB, so the test does not depend on the machine.
func TestCompileRefusesAKVCacheLargerThanMemory(t *testing.T) {
	t.Setenv(limits.MemoryEnv, "1G")
	in := rewriteGGUF(t, func(kv []gguf.KV) []gguf.KV { return setKV(kv, "llama.context_length", uint32(1<<24)) })
	out := filepath.Join(t.TempDir(), "m.aot")
	code, _, stderr := runCLI(t, "compile", in, "-o", out, "--ctx", "0")
	if code != 1 || !strings.Contains(stderr, "KV cache of 16777216 positions needs") ||
		!strings.Contains(stderr, "available") || !strings.Contains(stderr, "--ctx") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("an artifact was written")
	}
	if code, _, stderr := runCLI(t, "compile", in, "-o", out, "--ctx", "256"); code != 0 {
		t.Fatalf("--ctx 256: exit %d: %s", code, stderr)
	}
}

// TestEndlessInputsEndInAnError: text inputs that never end (/dev/zero,
// /dev/urandom) are refused as devices with an error naming the file, and a model path that is a named pipe is refused at once
// instead of blocking.
func TestEndlessInputsEndInAnError(t *testing.T) {
	gguf := testutil.Path(t, "models/stories260K/stories260K.gguf")
	for _, dev := range []string{"/dev/zero", "/dev/urandom"} {
		if _, err := os.Stat(dev); err != nil {
			t.Skipf("%s: %v", dev, err)
		}
	}
	dir := t.TempDir()
	tpl := filepath.Join(dir, "t.jinja")
	if err := os.WriteFile(tpl, []byte("{{ messages[0].content }}"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", "-m", gguf, "-n", "1", "-f", "/dev/zero"},
		{"template", "-m", tpl, "--messages", "/dev/zero"},
		{"ppl", "-m", gguf, "--data", "/dev/zero"},
		{"compile", gguf, "-o", filepath.Join(dir, "a.aot"), "--kv", "u8", "--calib", "/dev/zero"},
		{"compile", gguf, "-o", filepath.Join(dir, "b.aot"), "--tokenizer", "/dev/urandom"},
	} {
		code, _, stderr := runCLI(t, args...)
		dev := args[len(args)-1]
		if code != 1 || !strings.Contains(stderr, "character device") || !strings.Contains(stderr, dev) {
			t.Errorf("%v: exit %d, %s", args, code, stderr)
		}
	}
	fifo := filepath.Join(dir, "model.gguf")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", "-m", fifo, "-p", "x"},
		{"tokenize", "-m", fifo, "--", "x"},
		{"compile", fifo, "-o", filepath.Join(dir, "c.aot")},
		{"quantize", fifo, "-o", filepath.Join(dir, "q")},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != 1 || !strings.Contains(stderr, "named pipe") {
			t.Errorf("%v: exit %d, %s", args, code, stderr)
		}
	}
}

// TestEmptyTokenizerFolderIsAnError: an empty folder as --tokenizer is an
// error naming the folder, not ignored.
func TestEmptyTokenizerFolderIsAnError(t *testing.T) {
	gguf := testutil.Path(t, "models/stories260K/stories260K.gguf")
	empty := t.TempDir()
	for _, args := range [][]string{
		{"compile", gguf, "-o", filepath.Join(t.TempDir(), "m.aot"), "--tokenizer", empty},
		{"run", "-m", gguf, "-p", "x", "-n", "1", "--tokenizer", empty},
	} {
		code, _, stderr := runCLI(t, args...)
		if code != 1 || !strings.Contains(stderr, empty) || !strings.Contains(stderr, "no tokenizer.json") {
			t.Errorf("%v: exit %d, %s", args, code, stderr)
		}
	}
}

// TestHostileChatTemplateThroughRun: a GGUF whose embedded chat template
// recurses without end fails run --chat with the limit's name (it was Go's
// fatal stack overflow), and template fails the same way on range().
func TestHostileChatTemplateThroughRun(t *testing.T) {
	in := rewriteGGUF(t, func(kv []gguf.KV) []gguf.KV {
		return setKV(kv, "tokenizer.chat_template", `{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}`)
	})
	code, _, stderr := runCLI(t, "run", "-m", in, "--chat", "-p", "hi", "-n", "1", "--ctx", "64")
	if code != 1 || !strings.Contains(stderr, "MaxTemplateDepth") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("run --chat: exit %d, %s", code, stderr)
	}
	dir := t.TempDir()
	tpl, msgs := filepath.Join(dir, "t.jinja"), filepath.Join(dir, "m.json")
	if err := os.WriteFile(tpl, []byte(`{% for i in range(1000000000) %}{{ i }}{% endfor %}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(msgs, []byte(`[{"role": "user", "content": "hi"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCLI(t, "template", "-m", tpl, "--messages", msgs)
	if code != 1 || !strings.Contains(stderr, "MaxTemplateIterations") {
		t.Errorf("template: exit %d, %s", code, stderr)
	}
}

// TestRunFlagsAreValidated: out-of-range numbers are errors naming the
// flag, before any model is read; -n 0 reads the prompt and generates
// nothing (as llama.cpp), --ctx 0 is the model's trained context and
// -1 keeps its documented meanings.
func TestRunFlagsAreValidated(t *testing.T) {
	gguf := testutil.Path(t, "models/stories260K/stories260K.gguf")
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"-n", "-5"}, "-n -5"},
		{[]string{"--ctx", "-3"}, "--ctx -3"},
		{[]string{"-t", "0"}, "-t 0"},
		{[]string{"-t", "-3"}, "-t -3"},
		{[]string{"--repeat-last-n", "-2"}, "--repeat-last-n -2"},
		{[]string{"--seed", "-99"}, "--seed -99"},
		{[]string{"--temp", "Inf"}, "temperature +Inf"},
		{[]string{"--temp", "NaN"}, "temperature NaN"},
		{[]string{"--repeat-penalty", "NaN"}, "repeat penalty NaN"},
		{[]string{"--repeat-penalty", "-Inf"}, "repeat penalty -Inf"},
	} {
		args := append([]string{"run", "-m", gguf, "-p", "Once"}, c.flags...)
		code, stdout, stderr := runCLI(t, args...)
		if code != 1 || !strings.Contains(stderr, c.want) || stdout != "" {
			t.Errorf("%v: exit %d, %q, want an error naming %q", c.flags, code, stderr, c.want)
		}
	}
	code, stdout, stderr := runCLI(t, "run", "-m", gguf, "-p", "Once upon a time", "-n", "0", "--json")
	if code != 0 || !strings.Contains(stdout, `"ids":[]`) || !strings.Contains(stdout, `"stop_reason":"length"`) {
		t.Errorf("-n 0: exit %d, %s %s", code, stdout, stderr)
	}
	for _, flags := range [][]string{{"--ctx", "0"}, {"--repeat-last-n", "-1", "--repeat-penalty", "1.1"}, {"-n", "-1", "--ctx", "32"}} {
		args := append([]string{"run", "-m", gguf, "-p", "Once", "--temp", "0", "--json"}, flags...)
		if code, stdout, stderr := runCLI(t, args...); code != 0 || !strings.Contains(stdout, `"ids":[`) {
			t.Errorf("%v: exit %d, %s %s", flags, code, stdout, stderr)
		}
	}
}

// TestGGUFWrongTypesAreRefused: a GGUF whose epsilon is a string or whose
// EOS is a list of strings is refused at compile with the key's name.
func TestGGUFWrongTypesAreRefused(t *testing.T) {
	for _, c := range []struct {
		key string
		v   any
	}{
		{"llama.attention.layer_norm_rms_epsilon", "x"},
		{"tokenizer.ggml.eos_token_id", []string{"a"}},
	} {
		in := rewriteGGUF(t, func(kv []gguf.KV) []gguf.KV { return setKV(kv, c.key, c.v) })
		code, _, stderr := runCLI(t, "compile", in, "-o", filepath.Join(t.TempDir(), "m.aot"))
		if code != 1 || !strings.Contains(stderr, c.key) {
			t.Errorf("%s = %v: exit %d, %s", c.key, c.v, code, stderr)
		}
	}
}

// TestCompileRefusesATokenizerThatCannotWork: a 32000-piece SentencePiece
// tokenizer with the 512-token stories260K, and a GGUF tokenizer of a kind
// the runtime does not implement, are refused at compile time instead of
// being stored in an artifact that fails (or produces garbage) at run time.
func TestCompileRefusesATokenizerThatCannotWork(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	big := testutil.Path(t, "llama2c/tokenizer.model")
	code, _, stderr := runCLI(t, "compile", src, "-o", filepath.Join(t.TempDir(), "m.aot"), "--tokenizer", big)
	if code != 1 || !strings.Contains(stderr, "32000 tokens, more than the model's vocabulary of 512") {
		t.Errorf("32000-piece tokenizer: exit %d, %s", code, stderr)
	}
	in := rewriteGGUF(t, func(kv []gguf.KV) []gguf.KV { return setKV(kv, "tokenizer.ggml.model", "bert") })
	out := filepath.Join(t.TempDir(), "m.aot")
	code, _, stderr = runCLI(t, "compile", in, "-o", out)
	if code != 1 || !strings.Contains(stderr, "bert") || !strings.Contains(stderr, "tokenizer") {
		t.Errorf("bert tokenizer: exit %d, %s", code, stderr)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("an artifact was written")
	}
}
