package main

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestCompileRefusesContradictoryGGUFs: a GGUF whose metadata contradicts
// its tensors or holds a value no model can run with is refused by
// compile with one line naming the field, and nothing is written: a block
// count below the blocks present, a non-finite epsilon or rope factor, a
// BOS or EOS id outside the vocabulary (the BOS was dropped before, while
// the EOS was refused).
func TestCompileRefusesContradictoryGGUFs(t *testing.T) {
	for _, c := range []struct {
		name, want string
		edit       func(kv []gguf.KV) []gguf.KV
	}{
		{"block count", "llama.block_count", func(kv []gguf.KV) []gguf.KV { return setKV(kv, "llama.block_count", uint32(3)) }},
		{"eps inf", "layer_norm_rms_epsilon", func(kv []gguf.KV) []gguf.KV {
			return setKV(kv, "llama.attention.layer_norm_rms_epsilon", float32(math.Inf(1)))
		}},
		{"rope factor nan", "llama.rope.scaling.factor", func(kv []gguf.KV) []gguf.KV {
			return setKV(setKV(kv, "llama.rope.scaling.type", "linear"), "llama.rope.scaling.factor", float32(math.NaN()))
		}},
		{"freq base nan", "llama.rope.freq_base", func(kv []gguf.KV) []gguf.KV {
			return setKV(kv, "llama.rope.freq_base", float32(math.NaN()))
		}},
		{"bos", "bos_token_id", func(kv []gguf.KV) []gguf.KV { return setKV(kv, "tokenizer.ggml.bos_token_id", uint32(100000)) }},
		{"eos", "eos_token_id", func(kv []gguf.KV) []gguf.KV { return setKV(kv, "tokenizer.ggml.eos_token_id", uint32(512)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := rewriteGGUF(t, c.edit)
			out := filepath.Join(t.TempDir(), "m.aot")
			code, _, stderr := runCLI(t, "compile", in, "-o", out)
			if code == 0 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("exit %d: %s", code, stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("an artifact was written")
			}
		})
	}
	// -1 written unsigned is "no BOS", not an error
	in := rewriteGGUF(t, func(kv []gguf.KV) []gguf.KV { return setKV(kv, "tokenizer.ggml.bos_token_id", uint32(math.MaxUint32)) })
	if code, _, stderr := runCLI(t, "compile", in, "-o", filepath.Join(t.TempDir(), "m.aot")); code != 0 {
		t.Errorf("bos 0xFFFFFFFF: exit %d: %s", code, stderr)
	}
}

// rewriteGGUFTensor writes a copy of stories260K.gguf in which the float32
// tensor name has value v at index i.
func rewriteGGUFTensor(t *testing.T, name string, i int, v float32) string {
	t.Helper()
	f, err := gguf.Open(testutil.Path(t, "models/stories260K/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []gguf.WriteTensor
	found := false
	for _, ti := range f.Tensors() {
		d, err := f.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		if ti.Name == name {
			if ti.DType != tensor.F32 {
				t.Fatalf("%s is %v, not F32", name, ti.DType)
			}
			d = slices.Clone(d)
			binary.LittleEndian.PutUint32(d[4*i:], math.Float32bits(v))
			found = true
		}
		ts = append(ts, gguf.WriteTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: d})
	}
	if !found {
		t.Fatalf("no tensor %s", name)
	}
	out := filepath.Join(t.TempDir(), "edited.gguf")
	w, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.Write(w, f.KVs(), ts); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// onlyEntries fails unless dir holds exactly names (no temporary file
// left beside them).
func onlyEntries(t *testing.T, dir string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, names) {
		t.Errorf("%s holds %v, want %v", dir, got, names)
	}
}

// TestNonFiniteWeights: a NaN or an infinity in a weight is refused by
// compile naming the tensor; --allow-nonfinite keeps it, and inspect
// --verify then reports it with a non-zero exit, while a clean artifact
// verifies.
func TestNonFiniteWeights(t *testing.T) {
	for _, c := range []struct {
		tensor, canonical string
		v                 float32
	}{
		{"blk.0.attn_q.weight", "model.layers.0.self_attn.q_proj.weight", float32(math.NaN())},
		{"blk.4.ffn_down.weight", "model.layers.4.mlp.down_proj.weight", float32(math.Inf(-1))},
		{"output_norm.weight", "model.norm.weight", float32(math.Inf(1))},
	} {
		in := rewriteGGUFTensor(t, c.tensor, 7, c.v)
		dir := t.TempDir()
		out := filepath.Join(dir, "m.aot")
		code, _, stderr := runCLI(t, "compile", in, "-o", out)
		if code == 0 || !strings.Contains(stderr, c.tensor) {
			t.Errorf("%s = %v: exit %d: %s", c.tensor, c.v, code, stderr)
		}
		onlyEntries(t, dir)
		if code, _, stderr := runCLI(t, "compile", in, "-o", out, "--allow-nonfinite"); code != 0 {
			t.Fatalf("--allow-nonfinite: exit %d: %s", code, stderr)
		}
		code, _, stderr = runCLI(t, "inspect", out, "--verify")
		if code == 0 || !strings.Contains(stderr, "non-finite") || !strings.Contains(stderr, c.canonical) {
			t.Errorf("inspect --verify of %s = %v: exit %d: %s", c.tensor, c.v, code, stderr)
		}
	}
	out := filepath.Join(t.TempDir(), "clean.aot")
	if code, _, stderr := runCLI(t, "compile", testutil.Path(t, "models/stories260K/stories260K.gguf"), "-o", out); code != 0 {
		t.Fatalf("clean: exit %d: %s", code, stderr)
	}
	if code, stdout, stderr := runCLI(t, "inspect", out, "--verify"); code != 0 || !strings.Contains(stdout, "finite") {
		t.Errorf("inspect --verify of a clean artifact: exit %d: %s %s", code, stdout, stderr)
	}
}

// TestCompileProvesTheArtifactRunnable: a chat template that cannot render
// a one-message conversation (it raises, loops past its budget, or does
// not parse) or a tokenizer that does not load makes compile fail with one
// line naming the problem, leaving nothing in the output folder.
func TestCompileProvesTheArtifactRunnable(t *testing.T) {
	for _, c := range []struct {
		name, key string
		v         any
		want      string
	}{
		{"raising template", "tokenizer.chat_template", `{{ raise_exception("no conversation fits") }}`, "no conversation fits"},
		{"looping template", "tokenizer.chat_template", `{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}`, "MaxTemplateIterations"},
		{"growing template", "tokenizer.chat_template", `{{ '{:>900000000}'.format(messages[0].content) }}`, "MaxTemplateOutput"},
		{"broken template", "tokenizer.chat_template", `{% for m in messages %}{{ m.content }`, "chat"},
		{"tokenizer without merges", "tokenizer.ggml.model", "gpt2", "tokenizer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := rewriteGGUF(t, func(kv []gguf.KV) []gguf.KV { return setKV(kv, c.key, c.v) })
			dir := t.TempDir()
			code, _, stderr := runCLI(t, "compile", in, "-o", filepath.Join(dir, "m.aot"))
			if code == 0 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("exit %d: %s", code, stderr)
			}
			onlyEntries(t, dir)
		})
	}
	in := rewriteGGUF(t, func(kv []gguf.KV) []gguf.KV {
		return setKV(kv, "tokenizer.chat_template", `{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}`)
	})
	dir := t.TempDir()
	if code, _, stderr := runCLI(t, "compile", in, "-o", filepath.Join(dir, "m.aot")); code != 0 {
		t.Fatalf("a working template: exit %d: %s", code, stderr)
	}
	onlyEntries(t, dir, "m.aot")
}
