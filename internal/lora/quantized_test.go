package lora_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/lora"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/recipe"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

// q4Fixture writes the qwen3 fixture's GGUF with its layers' matrices in
// Q4_0 blocks (the rest float32) and returns its path.
func q4Fixture(t *testing.T) string {
	t.Helper()
	f, err := gguf.Open(testutil.ArchModelPaths(t, "qwen3")["gguf"])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []gguf.WriteTensor
	for _, ti := range f.Tensors() {
		v, err := f.ReadFloat32(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		dt := tensor.F32
		if strings.HasPrefix(ti.Name, "blk.") && len(ti.Shape) == 2 && ti.Shape[1]%32 == 0 {
			dt = tensor.Q4_0
		}
		ts = append(ts, gguf.WriteTensor{Name: ti.Name, DType: dt, Shape: ti.Shape, Values: v})
	}
	path := filepath.Join(t.TempDir(), "q4.gguf")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(out)
	if err := gguf.Write(bw, f.KVs(), ts); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMergeKeepsQ4 merges the qwen3 adapter into a Q4_0 GGUF: the merged
// linears stay 4-bit in the artifact (requantized), and its logits are
// no further from those of the exact float32 merge of the same file
// (--gguf-weights f32) than twice what Q4_0 costs the base model.
func TestMergeKeepsQ4(t *testing.T) {
	o, _ := lora.ReadOracle(t, "qwen3")
	src := q4Fixture(t)
	specs := []lora.Spec{{Path: filepath.Join("testdata", "qwen3"), Scale: 1}}
	logits := map[string][]float32{}
	for _, mode := range []string{compile.GGUFNative, compile.GGUFFloat32} {
		out := filepath.Join(t.TempDir(), mode+".aot")
		if err := compile.CompileFile(src, out, compile.Options{ARLens: []int{16}, Ctx: 128, LoRA: specs, GGUFWeights: mode}); err != nil {
			t.Fatal(err)
		}
		if mode == compile.GGUFNative {
			a, err := artifact.Open(out, artifact.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, ti := range a.Tensors() {
				if strings.HasSuffix(ti.Name, "q_proj.weight") && !strings.Contains(ti.Layout, "q4") {
					t.Errorf("%s is stored as %v %q, not 4-bit", ti.Name, ti.DType, ti.Layout)
				}
			}
			a.Close()
		}
		e, err := engine.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		logits[mode] = allLogits(t, e, nil, 0, o.Tokens)
		e.Close()
	}
	// what Q4_0 alone costs: the fixture's float32 weights against their
	// Q4_0 blocks, without the adapter
	var q4Cost float64
	{
		base := map[string][]float32{}
		for name, path := range map[string]string{"f32": testutil.ArchModelPaths(t, "qwen3")["gguf"], "q4": src} {
			out := filepath.Join(t.TempDir(), name+".aot")
			if err := compile.CompileFile(path, out, compile.Options{ARLens: []int{16}, Ctx: 128}); err != nil {
				t.Fatal(err)
			}
			e, err := engine.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			base[name] = allLogits(t, e, nil, 0, o.Tokens)
			e.Close()
		}
		q4Cost = lora.MaxDiff(base["f32"], base["q4"])
	}
	d := lora.MaxDiff(logits[compile.GGUFNative], logits[compile.GGUFFloat32])
	t.Logf("Q4_0 base merged, requantized vs float32: max |logit diff| %.3g; Q4_0 blocks vs float32 without the adapter: %.3g", d, q4Cost)
	if d > 2*q4Cost {
		t.Errorf("the requantized merge differs from the float32 merge by %.3g, over twice what Q4_0 costs the base (%.3g)", d, q4Cost)
	}
}

// quantizedLogits quantizes the qwen3 fixture at w8a16 with specs
// merged, compiles the folder and returns the engine's logits of tokens
// and the artifact's provenance.
func quantizedLogits(t *testing.T, specs []lora.Spec, tokens []int) ([]float32, map[string]any) {
	t.Helper()
	rcp, err := recipe.Load("w8a16")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "q")
	if _, err := recipe.Quantize(testutil.ArchModelPaths(t, "qwen3")["hf"], dir, recipe.QuantizeOptions{Recipe: rcp, LoRA: specs}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "q.aot")
	if err := compile.CompileFile(dir, out, compile.Options{ARLens: []int{16}, Ctx: 128}); err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	return allLogits(t, e, nil, 0, tokens), e.Manifest().Provenance
}

// TestQuantizeLoRA quantizes the qwen3 fixture at w8a16 with its adapter
// merged at 0.5: the folder and the artifact compiled from it record the
// adapter, and the logits are llama.cpp's with the adapter at 0.5 within
// twice what w8a16 costs the base model (its logits against llama.cpp's
// without the adapter), and far from llama.cpp's at scale 1.
func TestQuantizeLoRA(t *testing.T) {
	o, want := lora.ReadOracle(t, "qwen3")
	got, prov := quantizedLogits(t, []lora.Spec{{Path: filepath.Join("testdata", "qwen3"), Scale: 0.5}}, o.Tokens)
	if l, ok := prov["lora"].([]any); !ok || len(l) != 1 || !strings.Contains(fmt.Sprint(l[0]), "qwen3") {
		t.Errorf("provenance %v does not record the adapter", prov)
	}
	plain, _ := quantizedLogits(t, nil, o.Tokens)
	var ref []float32
	for _, row := range testutil.ReadArchReference(t, "qwen3").Logits {
		ref = append(ref, row...)
	}
	cost := lora.MaxDiff(plain, ref)
	d, other := lora.MaxDiff(got, want[0.5]), lora.MaxDiff(got, want[1])
	t.Logf("w8a16, adapter merged at 0.5: max |logit diff| from llama.cpp %.3g (at scale 1: %.3g); w8a16 without the adapter: %.3g", d, other, cost)
	if d > 2*cost || d > other/4 {
		t.Errorf("w8a16 merged: logits differ from llama.cpp's by %.3g (w8a16 costs the base %.3g; from the adapter at 1: %.3g)", d, cost, other)
	}
}

// TestQuantizeRotatedRunTime quantizes the qwen3 fixture at w8a16 with
// R1 and R2 folded (random Hadamard, seed 1), compiles the folder (its
// rotation record goes to the artifact's manifest) and applies the
// fixture's adapter at run time at 0.5: the logits are llama.cpp's with
// the adapter at 0.5 within twice what the rotated w8a16 costs the base
// (its logits against llama.cpp's without the adapter), and far from
// the base's.
func TestQuantizeRotatedRunTime(t *testing.T) {
	o, want := lora.ReadOracle(t, "qwen3")
	rcp, err := recipe.Load("w8a16")
	if err != nil {
		t.Fatal(err)
	}
	rcp.Rotation.R1, rcp.Rotation.R2, rcp.Rotation.Seed = quant.RotationRandom, quant.RotationRandom, 1
	dir := filepath.Join(t.TempDir(), "q")
	if _, err := recipe.Quantize(testutil.ArchModelPaths(t, "qwen3")["hf"], dir, recipe.QuantizeOptions{Recipe: rcp}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "q.aot")
	if err := compile.CompileFile(dir, out, compile.Options{ARLens: []int{16}, Ctx: 128}); err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if len(e.Manifest().Rotation) == 0 {
		t.Fatal("the artifact compiled from the rotated folder has no rotation record")
	}
	ad, err := lora.ForEngine(e, "a", filepath.Join("testdata", "qwen3"), 1, engine.AdapterF32)
	if err != nil {
		t.Fatal(err)
	}
	var ref []float32
	for _, row := range testutil.ReadArchReference(t, "qwen3").Logits {
		ref = append(ref, row...)
	}
	cost := lora.MaxDiff(allLogits(t, e, nil, 0, o.Tokens), ref)
	got := allLogits(t, e, ad, 0.5, o.Tokens)
	d, far := lora.MaxDiff(got, want[0.5]), lora.MaxDiff(ref, want[0.5])
	t.Logf("w8a16 rotated by R1 and R2, run-time adapter at 0.5: max |logit diff| from llama.cpp %.3g; the rotated w8a16 base costs %.3g; the adapter moves llama.cpp's logits by %.3g", d, cost, far)
	if d > 2*cost || d > far/4 {
		t.Errorf("w8a16 rotated, run-time adapter: logits differ from llama.cpp's by %.3g (the base costs %.3g; the adapter moves them by %.3g)", d, cost, far)
	}
}
