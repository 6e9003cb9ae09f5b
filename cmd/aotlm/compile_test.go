package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// TestCompileAndRunArtifact compiles stories260K (from the GGUF, and from the
// llama2.c file with its tokenizer) and runs the artifact from text in
// hybrid and kv modes: the prompt encodes with the tokenizer stored in the
// artifact, and the greedy ids are llama2.c's run.c reference ids.
func TestCompileAndRunArtifact(t *testing.T) {
	ref := testutil.StoriesGreedy(t)
	dir := t.TempDir()
	sources := map[string][]string{
		"gguf":    {testutil.Path(t, "models/stories260K/stories260K.gguf")},
		"llama2c": {testutil.Path(t, "llama2c/stories260K.bin"), "--tokenizer", testutil.Path(t, "llama2c/tok512-dratman/tok512.bin")},
	}
	for name, src := range sources {
		out := filepath.Join(dir, name+".aot")
		args := append([]string{"compile"}, src...)
		args = append(args, "-o", out, "--ar-len", "4", "--ctx", "128")
		if code, _, stderr := runCLI(t, args...); code != 0 {
			t.Fatalf("%s: compile exit %d: %s", name, code, stderr)
		}
		for _, mode := range []string{"hybrid", "kv"} {
			for _, c := range ref.Cases[1:] {
				code, stdout, stderr := runCLI(t, "run", "-m", out, "--mode", mode, "-p", c.Prompt,
					"-n", "24", "--temp", "0", "--json", "--ignore-eos")
				if code != 0 {
					t.Fatalf("%s %s: exit %d: %s", name, mode, code, stderr)
				}
				var rep runJSON
				if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(rep.PromptIDs, c.PromptIDs) || !slices.Equal(rep.IDs, c.IDs[:24]) {
					t.Errorf("%s %s %q: prompt %v ids %v, want %v %v", name, mode, c.Prompt, rep.PromptIDs, rep.IDs, c.PromptIDs, c.IDs[:24])
				}
			}
		}
	}
	// a prompt longer than the compiled context is refused
	long := strings.Repeat("Once upon a time there was a dog. ", 40)
	code, _, stderr := runCLI(t, "run", "-m", filepath.Join(dir, "gguf.aot"), "-p", long)
	if code != 1 || !strings.Contains(stderr, "context") {
		t.Errorf("over-long prompt: exit %d, %q", code, stderr)
	}
}

// TestPerplexityOfArtifacts checks ppl through the engine: an f32 artifact
// scores exactly what the interpreter scores on the GGUF (same sums in the
// same order), and a u8 KV cache costs a little (measured +0.9% over the
// whole excerpt at ctx 256; asserted within +5% here on 10 chunks).
func TestPerplexityOfArtifacts(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	data := testutil.Path(t, "text/TinyStories-valid-excerpt.txt")
	dir := t.TempDir()
	ppl := func(model string) float64 {
		t.Helper()
		code, out, errs := runCLI(t, "ppl", "-m", model, "--data", data, "--ctx", "128", "--chunks", "10", "--json")
		if code != 0 {
			t.Fatalf("ppl %s: exit %d: %s", model, code, errs)
		}
		var r struct{ PPL float64 }
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r.PPL
	}
	for _, kv := range []string{"f32", "u8"} {
		out := filepath.Join(dir, kv+".aot")
		if code, _, errs := runCLI(t, "compile", src, "-o", out, "--ar-len", "8", "--ctx", "128", "--kv", kv); code != 0 {
			t.Fatalf("compile: %s", errs)
		}
	}
	base := ppl(src)
	// The same arithmetic but for the order of the SIMD sums in attention.
	if got := ppl(filepath.Join(dir, "f32.aot")); math.Abs(got-base) > 1e-5*base {
		t.Errorf("f32 artifact ppl %v, interpreter %v", got, base)
	}
	if got := ppl(filepath.Join(dir, "u8.aot")); !(got > base*0.99 && got < base*1.05) {
		t.Errorf("u8 KV ppl %v against %v", got, base)
	}
}

// TestKVF16 compiles stories260K with a binary16 KV cache: it keeps
// llama2.c's greedy ids for the first 24 tokens of every case (f16 holds
// these keys and values to about 3 decimal digits) and its perplexity is
// within 0.5% of the f32 cache's.
func TestKVF16(t *testing.T) {
	ref := testutil.StoriesGreedy(t)
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	out := filepath.Join(t.TempDir(), "f16.aot")
	if code, _, errs := runCLI(t, "compile", src, "-o", out, "--ar-len", "8", "--ctx", "128", "--kv", "f16"); code != 0 {
		t.Fatalf("compile: %s", errs)
	}
	for _, mode := range []string{"hybrid", "kv"} {
		for _, c := range ref.Cases[1:] {
			code, stdout, stderr := runCLI(t, "run", "-m", out, "--mode", mode, "-p", c.Prompt, "-n", "24", "--temp", "0", "--json", "--ignore-eos")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var rep runJSON
			json.Unmarshal([]byte(stdout), &rep)
			if !slices.Equal(rep.IDs, c.IDs[:24]) {
				t.Errorf("%s %q: %v, want %v", mode, c.Prompt, rep.IDs, c.IDs[:24])
			}
		}
	}
	data := testutil.Path(t, "text/TinyStories-valid-excerpt.txt")
	var f16, f32 struct{ PPL float64 }
	_, o1, _ := runCLI(t, "ppl", "-m", out, "--data", data, "--ctx", "128", "--chunks", "10", "--json")
	_, o2, _ := runCLI(t, "ppl", "-m", src, "--data", data, "--ctx", "128", "--chunks", "10", "--json")
	json.Unmarshal([]byte(o1), &f16)
	json.Unmarshal([]byte(o2), &f32)
	t.Logf("ppl f16 cache %.5f, f32 %.5f", f16.PPL, f32.PPL)
	if f16.PPL == 0 || f16.PPL > f32.PPL*1.005 || f16.PPL < f32.PPL*0.995 {
		t.Errorf("f16 cache ppl %v vs %v", f16.PPL, f32.PPL)
	}
}
