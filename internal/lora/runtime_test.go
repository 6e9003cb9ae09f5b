package lora_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/lora"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/rotate"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

// compileFixture compiles arch/<family> from src ("hf" or "gguf") with
// the adapters of specs merged, to a float32 artifact.
func compileFixture(t *testing.T, family, src string, specs []lora.Spec) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), family+".aot")
	err := compile.CompileFile(testutil.ArchModelPaths(t, family)[src], out, compile.Options{ARLens: []int{16}, Ctx: 128, LoRA: specs})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// allLogits feeds tokens to a fresh session of e with the adapter ad
// (nil: none) at scale and returns every position's logits, flattened.
func allLogits(t *testing.T, e *engine.Engine, ad *engine.Adapter, scale float32, tokens []int) []float32 {
	t.Helper()
	s, err := e.NewSession(engine.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.SetAdapter(ad, scale); err != nil {
		t.Fatal(err)
	}
	rows, err := s.PrefillAll(context.Background(), tokens)
	if err != nil {
		t.Fatal(err)
	}
	var out []float32
	for _, r := range rows {
		out = append(out, r...)
	}
	return out
}

// TestRunTimeMatchesLlamaCpp compiles each fixture without its adapter,
// applies the adapter at run time (from the PEFT folder and from the GGUF
// adapter, float32 and binary16) and checks the logits at both scales
// against llama.cpp's; an artifact carrying the adapter at both scales
// (chosen by name) and one with it merged by compile --lora must agree
// too.
func TestRunTimeMatchesLlamaCpp(t *testing.T) {
	for _, family := range []string{"llama", "qwen3"} {
		o, want := lora.ReadOracle(t, family)
		for _, src := range []string{"hf", "gguf"} {
			e, err := engine.Open(compileFixture(t, family, src, nil))
			if err != nil {
				t.Fatal(err)
			}
			for _, file := range []string{"", "adapter.gguf"} {
				for _, st := range []engine.AdapterStorage{engine.AdapterF32, engine.AdapterF16, engine.AdapterQ8} {
					ad, err := lora.ForEngine(e, "a", filepath.Join("testdata", family, file), 1, st)
					if err != nil {
						t.Fatal(err)
					}
					for scale, ref := range want {
						d := lora.MaxDiff(allLogits(t, e, ad, float32(scale), o.Tokens), ref)
						t.Logf("%s %s base, adapter %q (%v) at %g: max |logit diff| %.3g", family, src, file, st, scale, d)
						// binary16 and 8 bits round A and B: the llama
						// fixture's logits (up to 55) move by up to 0.008
						// (binary16) and 0.23 (8 bits, 0.4% of the
						// largest; Q4_0 moves the base's by 1.13)
						tol := map[engine.AdapterStorage]float64{engine.AdapterF32: 1e-3, engine.AdapterF16: 0.02, engine.AdapterQ8: 0.3}[st]
						if d > tol {
							t.Errorf("%s %s base, adapter %q (%v) at %g: logits differ from llama.cpp's by %.3g", family, src, file, st, scale, d)
						}
					}
				}
			}
			if d := lora.MaxDiff(allLogits(t, e, nil, 0, o.Tokens), want[1]); d < 0.1 {
				t.Errorf("%s: without the adapter the logits are within %.3g of the adapted ones", family, d)
			}
			e.Close()
		}
		// carried by the artifact, chosen by name
		carry := []lora.Named{{Name: "half", Spec: lora.Spec{Path: filepath.Join("testdata", family, "adapter.gguf"), Scale: 0.5}},
			{Name: "whole", Spec: lora.Spec{Path: filepath.Join("testdata", family), Scale: 1}}}
		out := filepath.Join(t.TempDir(), family+"-carry.aot")
		if err := compile.CompileFile(testutil.ArchModelPaths(t, family)["hf"], out, compile.Options{ARLens: []int{16}, Ctx: 128, Carry: carry}); err != nil {
			t.Fatal(err)
		}
		e, err := engine.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range carry {
			d := lora.MaxDiff(allLogits(t, e, e.LookupAdapter(c.Name), 1, o.Tokens), want[c.Scale])
			t.Logf("%s carried %s: max |logit diff| %.3g", family, c.Name, d)
			if d > 1e-3 {
				t.Errorf("%s carried %s: logits differ from llama.cpp's by %.3g", family, c.Name, d)
			}
		}
		e.Close()
		for scale, ref := range want {
			sp := lora.Spec{Path: filepath.Join("testdata", family), Scale: scale}
			e, err := engine.Open(compileFixture(t, family, "hf", []lora.Spec{sp}))
			if err != nil {
				t.Fatal(err)
			}
			d := lora.MaxDiff(allLogits(t, e, nil, 0, o.Tokens), ref)
			e.Close()
			t.Logf("%s merged by compile at %g: max |logit diff| %.3g", family, scale, d)
			if d > 1e-3 {
				t.Errorf("%s merged by compile at %g: logits differ from llama.cpp's by %.3g", family, scale, d)
			}
		}
	}
}

// writeDoRA writes a DoRA adapter for arch/<family> into a new folder:
// the fixture's PEFT adapter with a magnitude vector on every module,
// each row's the norm of the base weight's row times a random factor in
// [0.8, 1.2), so that the rescaling moves the logits visibly.
func writeDoRA(t *testing.T, family string) string {
	t.Helper()
	src := filepath.Join("testdata", family)
	a, err := lora.Read(src)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := detect.Open(testutil.ArchModelPaths(t, family)["hf"])
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	var ts []safetensors.Tensor
	for _, name := range a.Names() {
		p := a.Pairs[name]
		w, err := ck.ReadFloat32(name)
		if err != nil {
			t.Fatal(err)
		}
		m := make([]float32, p.Out)
		for o := range m {
			var n float64
			for _, v := range w[o*p.In : (o+1)*p.In] {
				n += float64(v) * float64(v)
			}
			m[o] = float32(math.Sqrt(n) * (0.8 + 0.4*rng.Float64()))
		}
		mod := "base_model.model." + strings.TrimSuffix(name, ".weight")
		ts = append(ts,
			safetensors.Tensor{Name: mod + ".lora_A.weight", DType: tensor.F32, Shape: []int64{int64(p.Rank), int64(p.In)}, Data: p.A},
			safetensors.Tensor{Name: mod + ".lora_B.weight", DType: tensor.F32, Shape: []int64{int64(p.Out), int64(p.Rank)}, Data: p.B},
			safetensors.Tensor{Name: mod + ".lora_magnitude_vector.weight", DType: tensor.F32, Shape: []int64{int64(p.Out)}, Data: m})
	}
	dir := filepath.Join(t.TempDir(), family+"-dora")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(src, lora.ConfigName))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["use_dora"] = true
	if raw, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, lora.ConfigName), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(filepath.Join(dir, lora.WeightsName), ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRunTimeDoRAMatchesMerged applies a DoRA adapter at run time (its
// magnitudes rescaling each output row by the norm of the adapted
// weight's row, computed at load from the base weights) and checks the
// logits against the adapter merged by compile --lora (the merged
// weight's rows rescaled), within 1e-3, at the adapter's own scale and
// at a session scale of 0.5 (the norms then computed for that scale),
// on the Hugging Face and the GGUF base; an artifact carrying the DoRA
// adapter (compile --adapter) agrees too. DoRA must move the logits
// away from plain LoRA's.
func TestRunTimeDoRAMatchesMerged(t *testing.T) {
	for _, family := range []string{"llama", "qwen3"} {
		o, lorRef := lora.ReadOracle(t, family)
		dir := writeDoRA(t, family)
		merged := map[float64][]float32{}
		for _, scale := range []float64{1, 0.5} {
			e, err := engine.Open(compileFixture(t, family, "hf", []lora.Spec{{Path: dir, Scale: scale}}))
			if err != nil {
				t.Fatal(err)
			}
			merged[scale] = allLogits(t, e, nil, 0, o.Tokens)
			e.Close()
		}
		if d := lora.MaxDiff(merged[1], lorRef[1]); d < 0.05 {
			t.Errorf("%s: DoRA's merged logits are within %.3g of plain LoRA's", family, d)
		}
		for _, src := range []string{"hf", "gguf"} {
			e, err := engine.Open(compileFixture(t, family, src, nil))
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range []engine.AdapterStorage{engine.AdapterF32, engine.AdapterF16} {
				ad, err := lora.ForEngine(e, "dora", dir, 1, st)
				if err != nil {
					t.Fatal(err)
				}
				for scale, ref := range merged {
					d := lora.MaxDiff(allLogits(t, e, ad, float32(scale), o.Tokens), ref)
					t.Logf("%s %s base, run-time DoRA (%v) at %g: max |logit diff| to merged %.3g", family, src, st, scale, d)
					tol := 1e-3
					if st == engine.AdapterF16 {
						tol = 0.02
					}
					if d > tol {
						t.Errorf("%s %s base, run-time DoRA (%v) at %g: logits differ from the merged adapter's by %.3g", family, src, st, scale, d)
					}
				}
			}
			e.Close()
		}
		out := filepath.Join(t.TempDir(), family+"-dora.aot")
		carry := []lora.Named{{Name: "dora", Spec: lora.Spec{Path: dir, Scale: 0.5}}}
		if err := compile.CompileFile(testutil.ArchModelPaths(t, family)["hf"], out, compile.Options{ARLens: []int{16}, Ctx: 128, Carry: carry}); err != nil {
			t.Fatal(err)
		}
		e, err := engine.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		d := lora.MaxDiff(allLogits(t, e, e.LookupAdapter("dora"), 1, o.Tokens), merged[0.5])
		e.Close()
		t.Logf("%s carried DoRA at 0.5: max |logit diff| to merged %.3g", family, d)
		if d > 1e-3 {
			t.Errorf("%s carried DoRA at 0.5: logits differ from the merged adapter's by %.3g", family, d)
		}
	}
}

// writeRandom writes a random PEFT adapter of rank 4 for the Hugging
// Face folder of arch/<family> into a new folder: on every linear weight
// of the model's graph (not the embedding, the output head or a
// convolution), A ~ N(0, 1/in) and B ~ N(0, 0.1²); with dora, a
// magnitude vector too (each row's norm in the base times a random
// factor in [0.8, 1.2)).
func writeRandom(t *testing.T, family string, dora bool) string {
	t.Helper()
	return writeRandomFor(t, testutil.ArchModelPaths(t, family)["hf"], family, dora, nil)
}

// writeRandomFor writes writeRandom's adapter for the checkpoint at path
// (of any source: the adapter names its Hugging Face modules, its rows
// in Hugging Face's order), into a new folder named after label. DoRA
// reads the base rows' norms from the checkpoint, so it needs a Hugging
// Face one. Weights skip names (nil: none) are left out.
func writeRandomFor(t *testing.T, path, family string, dora bool, skip func(string) bool) string {
	t.Helper()
	ck, err := detect.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	src, err := arch.Open(ck)
	if err != nil {
		t.Fatal(err)
	}
	g, err := arch.Build(&src.Config, arch.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	var ts []safetensors.Tensor
	n := 0
	lay, err := arch.LayoutOf(&src.Config)
	if err != nil {
		t.Fatal(err)
	}
	linear := map[string]bool{}
	for _, n := range g.Nodes {
		if n.Op == op.Linear {
			linear[n.Weight] = true
		}
	}
	for _, name := range src.Names() {
		sh, gs := src.Shapes[name], g.Weights[name]
		if len(sh) != 2 || !slices.Equal(sh, gs) || strings.Contains(name, "conv1d") || strings.Contains(name, "embed") || strings.Contains(name, "wte") || strings.Contains(name, "lm_head") {
			continue
		}
		if skip != nil && skip(name) {
			continue
		}
		// RWKV-7: the linears the loader keeps as stored
		if lay.Loaded && (!arch.LoadedAsStored(&src.Config, name) || !linear[name]) {
			continue
		}
		hf, ok := arch.TensorNameIn(&src.Config, "hf", name)
		if !ok {
			t.Fatalf("%s has no checkpoint name", name)
		}
		out, in, rank := sh[0], sh[1], 4
		n++
		a, b := make([]float32, rank*in), make([]float32, out*rank)
		for i := range a {
			a[i] = float32(rng.NormFloat64() / math.Sqrt(float64(in)))
		}
		for i := range b {
			b[i] = float32(rng.NormFloat64() * 0.1)
		}
		mod := "base_model.model." + strings.TrimSuffix(hf, ".weight")
		ts = append(ts,
			safetensors.Tensor{Name: mod + ".lora_A.weight", DType: tensor.F32, Shape: []int64{int64(rank), int64(in)}, Data: a},
			safetensors.Tensor{Name: mod + ".lora_B.weight", DType: tensor.F32, Shape: []int64{int64(out), int64(rank)}, Data: b})
		if dora {
			if src.Config.Source != "hf" {
				t.Fatalf("%s: DoRA magnitudes need a Hugging Face checkpoint, not a %s one", path, src.Config.Source)
			}
			w, err := ck.ReadFloat32(hf)
			if err != nil {
				t.Fatal(err)
			}
			m := make([]float32, out)
			for o := range m {
				var n float64
				for _, v := range w[o*in : (o+1)*in] {
					n += float64(v) * float64(v)
				}
				m[o] = float32(math.Sqrt(n) * (0.8 + 0.4*rng.Float64()))
			}
			ts = append(ts, safetensors.Tensor{Name: mod + ".lora_magnitude_vector.weight", DType: tensor.F32, Shape: []int64{int64(out)}, Data: m})
		}
	}
	if len(ts) == 0 {
		t.Fatalf("%s: no linear to adapt", family)
	}
	dir := filepath.Join(t.TempDir(), family+"-adapter")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := json.Marshal(map[string]any{"peft_type": "LORA", "r": 4, "lora_alpha": 8, "target_modules": "all-linear",
		"use_dora": dora, "bias": "none", "base_model_name_or_path": "arch/" + family})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, lora.ConfigName), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.Write(filepath.Join(dir, lora.WeightsName), ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d adapted linears", family, n)
	return dir
}

// TestRunTimeConvertedFamilies applies random adapters (LoRA and DoRA)
// at run time to the families that convert their weights on load
// (Qwen3.5's value heads, CodeGen's fused q, k and v rows, Granite 4
// hybrid) and checks the logits against the adapter merged into the
// checkpoint's weights before conversion, within 1e-3; the adapter must
// move the logits.
func TestRunTimeConvertedFamilies(t *testing.T) {
	for _, family := range []string{"qwen35", "codegen2", "granitehybrid"} {
		tokens := []int{1, 5, 9, 2, 7, 3, 11, 4}
		base, err := engine.Open(compileFixture(t, family, "hf", nil))
		if err != nil {
			t.Fatal(err)
		}
		plain := allLogits(t, base, nil, 0, tokens)
		for _, dora := range []bool{false, true} {
			dir := writeRandom(t, family, dora)
			e, err := engine.Open(compileFixture(t, family, "hf", []lora.Spec{{Path: dir, Scale: 1}}))
			if err != nil {
				t.Fatal(err)
			}
			merged := allLogits(t, e, nil, 0, tokens)
			e.Close()
			ad, err := lora.ForEngine(base, fmt.Sprint("a", dora), dir, 1, engine.AdapterF32)
			if err != nil {
				t.Fatal(err)
			}
			d := lora.MaxDiff(allLogits(t, base, ad, 1, tokens), merged)
			moved := lora.MaxDiff(plain, merged)
			t.Logf("%s (DoRA %v): run time vs merged max |logit diff| %.3g; the adapter moves the logits by %.3g", family, dora, d, moved)
			if d > 1e-3 {
				t.Errorf("%s (DoRA %v): run-time logits differ from the merged adapter's by %.3g", family, dora, d)
			}
			if moved < 0.01 {
				t.Errorf("%s (DoRA %v): the adapter moves the logits by only %.3g", family, dora, moved)
			}
		}
		base.Close()
	}
}

// TestRecipesRefused: run-time adapters are refused on artifacts whose
// recipe rotates the weights (R1, R2) or rescales their input channels
// (AWQ), naming why, and accepted on one that only chooses the integers
// (GPTQ) or rotates online (R3, R4).
func TestRecipesRefused(t *testing.T) {
	for file, want := range map[string]string{"lpbq-rot.json": "rotated", "lpbq-r34.json": "", "lpbq-awq.json": "AWQ", "lpbq-gptq.json": ""} {
		r, err := os.ReadFile(filepath.Join("..", "..", "docs", "recipes", file))
		if err != nil {
			t.Fatal(err)
		}
		err = lora.CheckRecipe(r)
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want an error naming %q", file, err, want)
		}
	}
	if err := lora.CheckRecipe(nil); err != nil {
		t.Errorf("no recipe: %v", err)
	}
}

// TestRunTimeOnlineRotations applies the fixtures' adapters at run time
// to float artifacts rotated by R3 and R4 (Hadamard steps on q and k and
// before the down projection, whose weight holds W·H), their manifest
// recording recipe lpbq-r34's rotations: the down projection's A turns
// into A·H, and the logits match llama.cpp's of the unrotated model with
// the adapter within 1e-4 of the largest logit (the rotated model is
// equivalent up to float rounding), in float32 and as DoRA against the
// merge.
func TestRunTimeOnlineRotations(t *testing.T) {
	recipe, err := os.ReadFile(filepath.Join("..", "..", "docs", "recipes", "lpbq-r34.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, family := range []string{"llama", "qwen3"} {
		o, want := lora.ReadOracle(t, family)
		ck, err := detect.Open(testutil.ArchModelPaths(t, family)["hf"])
		if err != nil {
			t.Fatal(err)
		}
		m, err := arch.Load(ck)
		ck.Close()
		if err != nil {
			t.Fatal(err)
		}
		rep, err := rotate.Apply(m, rotate.Options{R3: quant.RotationHadamard, R4: quant.RotationHadamard})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Down == 0 || !m.Config.RotateDown {
			t.Fatalf("%s: R4 rotated %d down projections", family, rep.Down)
		}
		out := filepath.Join(t.TempDir(), family+"-r34.aot")
		if err := compile.CompileModel(m, compile.Source{Recipe: recipe}, compile.Options{ARLens: []int{16}, Ctx: 128}, out); err != nil {
			t.Fatal(err)
		}
		e, err := engine.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		ad, err := lora.ForEngine(e, "a", filepath.Join("testdata", family), 1, engine.AdapterF32)
		if err != nil {
			t.Fatal(err)
		}
		for scale, ref := range want {
			var big float64
			for _, v := range ref {
				big = math.Max(big, math.Abs(float64(v)))
			}
			d := lora.MaxDiff(allLogits(t, e, ad, float32(scale), o.Tokens), ref)
			t.Logf("%s rotated by R3 and R4, adapter at %g: max |logit diff| to llama.cpp %.3g (largest logit %.3g)", family, scale, d, big)
			if d > 1e-4*big {
				t.Errorf("%s rotated by R3 and R4, adapter at %g: logits differ from llama.cpp's by %.3g", family, scale, d)
			}
		}
		// DoRA: the norms of W·H's rows are W's
		dir := writeDoRA(t, family)
		me, err := engine.Open(compileFixture(t, family, "hf", []lora.Spec{{Path: dir, Scale: 1}}))
		if err != nil {
			t.Fatal(err)
		}
		merged := allLogits(t, me, nil, 0, o.Tokens)
		me.Close()
		dora, err := lora.ForEngine(e, "dora", dir, 1, engine.AdapterF32)
		if err != nil {
			t.Fatal(err)
		}
		d := lora.MaxDiff(allLogits(t, e, dora, 1, o.Tokens), merged)
		t.Logf("%s rotated by R3 and R4, DoRA: max |logit diff| to the merged, unrotated model %.3g", family, d)
		if d > 5e-3 {
			t.Errorf("%s rotated by R3 and R4, DoRA: logits differ from the merged adapter's by %.3g", family, d)
		}
		e.Close()
	}
}

// roundingBound is how far the float32 logits of two equal computations
// summed in different orders (merged or run-time adapters, SIMD or
// plain-Go kernels) may drift: 1e-5 of the larger of the largest logit
// and the adapter's own effect on the logits, and at least 2e-5. A wrong
// mapping of an adapter moves the logits by about its effect, five orders
// of magnitude more.
func roundingBound(big, moved float64) float64 { return math.Max(2e-5, 1e-5*math.Max(big, moved)) }

// TestRunTimeLlama2C applies a random PEFT adapter (Hugging Face names
// and row order) to the llama2.c checkpoint of stories260K, whose q and k
// rows are in Meta's interleaved order as in GGUF files: run time must
// equal the adapter merged by compile --lora within roundingBound, and
// the same adapter on the GGUF file of the same model must give the same
// logits, so the names and the q/k rows map as for GGUF.
func TestRunTimeLlama2C(t *testing.T) {
	bin := testutil.Path(t, "llama2c/stories260K.bin")
	gguf := testutil.Path(t, "models/stories260K/stories260K.gguf")
	tokens := []int{1, 403, 407, 261, 378, 429, 270, 316, 13}
	dir := writeRandomFor(t, bin, "stories260K", false, nil)
	comp := func(path string, specs []lora.Spec) *engine.Engine {
		out := filepath.Join(t.TempDir(), "m.aot")
		if err := compile.CompileFile(path, out, compile.Options{ARLens: []int{16}, Ctx: 64, LoRA: specs}); err != nil {
			t.Fatal(err)
		}
		e, err := engine.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	me := comp(bin, []lora.Spec{{Path: dir, Scale: 1}})
	merged := allLogits(t, me, nil, 0, tokens)
	me.Close()
	for _, path := range []string{bin, gguf} {
		e := comp(path, nil)
		plain := allLogits(t, e, nil, 0, tokens)
		ad, err := lora.ForEngine(e, "a", dir, 1, engine.AdapterF32)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(path), err)
		}
		d, moved := lora.MaxDiff(allLogits(t, e, ad, 1, tokens), merged), lora.MaxDiff(plain, merged)
		e.Close()
		var big float64
		for _, v := range merged {
			big = math.Max(big, math.Abs(float64(v)))
		}
		t.Logf("%s: run time vs merged into the llama2.c file max |logit diff| %.3g (largest logit %.3g); the adapter moves the logits by %.3g", filepath.Base(path), d, big, moved)
		if d > roundingBound(big, moved) {
			t.Errorf("%s: run-time logits differ from the merged adapter's by %.3g", filepath.Base(path), d)
		}
		if moved < 0.01 {
			t.Errorf("%s: the adapter moves the logits by only %.3g", filepath.Base(path), moved)
		}
	}
}

// TestRunTimeFoldedRotations applies the fixtures' adapters at run time
// to float artifacts whose weights R1 and R2 rotated (recipe lpbq-rot's
// random Hadamard rotations, with R1 folding the norms' gains), from the
// manifest's rotation record: A becomes A·diag(g)·Q after a folded norm
// and A·H on the output projection, B becomes Qᵀ·B on the linears
// writing to the residual stream and Hᵀ·B on the values. The logits
// match the adapter merged into the unrotated model within roundingBound
// (the rotated base alone is that close to the unrotated one), at run time and carried by the rotated artifact
// (compile --adapter), and the same artifact without its rotation record
// refuses the adapter, run time or carried, naming why.
func TestRunTimeFoldedRotations(t *testing.T) {
	recipe, err := os.ReadFile(filepath.Join("..", "..", "docs", "recipes", "lpbq-rot.json"))
	if err != nil {
		t.Fatal(err)
	}
	rcp, err := quant.ParseRecipe(recipe)
	if err != nil {
		t.Fatal(err)
	}
	for _, family := range []string{"llama", "qwen3"} {
		o, _ := lora.ReadOracle(t, family)
		ck, err := detect.Open(testutil.ArchModelPaths(t, family)["hf"])
		if err != nil {
			t.Fatal(err)
		}
		m, err := arch.Load(ck)
		ck.Close()
		if err != nil {
			t.Fatal(err)
		}
		rot := rcp.Rotation
		rep, err := rotate.Apply(m, rotate.Options{R1: rot.R1, R2: rot.R2, Seed: rot.Seed})
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Gains) == 0 || len(rep.R1Out) == 0 || len(rep.R2Layers) == 0 {
			t.Fatalf("%s: the rotation record keeps %d gains, %d rotated outputs, %d R2 layers", family, len(rep.Gains), len(rep.R1Out), len(rep.R2Layers))
		}
		record, err := json.Marshal(rep)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), family+"-rot.aot")
		if err := compile.CompileModel(m, compile.Source{Recipe: recipe, Rotation: record}, compile.Options{ARLens: []int{16}, Ctx: 128}, out); err != nil {
			t.Fatal(err)
		}
		e, err := engine.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		rotBase := allLogits(t, e, nil, 0, o.Tokens)
		be, err := engine.Open(compileFixture(t, family, "hf", nil))
		if err != nil {
			t.Fatal(err)
		}
		base := allLogits(t, be, nil, 0, o.Tokens)
		be.Close()
		t.Logf("%s rotated by R1 and R2, no adapter: max |logit diff| to the unrotated model %.3g", family, lora.MaxDiff(rotBase, base))
		for _, scale := range []float64{1, 0.5} {
			me, err := engine.Open(compileFixture(t, family, "hf", []lora.Spec{{Path: filepath.Join("testdata", family), Scale: scale}}))
			if err != nil {
				t.Fatal(err)
			}
			merged := allLogits(t, me, nil, 0, o.Tokens)
			me.Close()
			var big float64
			for _, v := range merged {
				big = math.Max(big, math.Abs(float64(v)))
			}
			for _, file := range []string{"", "adapter.gguf"} {
				ad, err := lora.ForEngine(e, fmt.Sprint(file, scale), filepath.Join("testdata", family, file), scale, engine.AdapterF32)
				if err != nil {
					t.Fatal(err)
				}
				d, moved := lora.MaxDiff(allLogits(t, e, ad, 1, o.Tokens), merged), lora.MaxDiff(base, merged)
				t.Logf("%s rotated by R1 and R2, adapter %q at %g: max |logit diff| to the merged, unrotated model %.3g (largest logit %.3g; the adapter moves them by %.3g)", family, file, scale, d, big, moved)
				if d > roundingBound(big, moved) {
					t.Errorf("%s rotated by R1 and R2, adapter %q at %g: logits differ from the merged adapter's by %.3g", family, file, scale, d)
				}
			}
			// carried by the rotated artifact (compile --adapter)
			carry := filepath.Join(t.TempDir(), family+"-rot-carry.aot")
			named := []lora.Named{{Name: "c", Spec: lora.Spec{Path: filepath.Join("testdata", family), Scale: scale}}}
			if err := compile.CompileModel(m, compile.Source{Recipe: recipe, Rotation: record}, compile.Options{ARLens: []int{16}, Ctx: 128, Carry: named}, carry); err != nil {
				t.Fatal(err)
			}
			ce, err := engine.Open(carry)
			if err != nil {
				t.Fatal(err)
			}
			d := lora.MaxDiff(allLogits(t, ce, ce.LookupAdapter("c"), 1, o.Tokens), merged)
			ce.Close()
			t.Logf("%s rotated by R1 and R2, carried adapter at %g: max |logit diff| to the merged, unrotated model %.3g", family, scale, d)
			if d > roundingBound(big, 0) {
				t.Errorf("%s rotated by R1 and R2, carried adapter at %g: logits differ from the merged adapter's by %.3g", family, scale, d)
			}
		}
		e.Close()
		// without the record, the adapter is refused
		bare := filepath.Join(t.TempDir(), family+"-bare.aot")
		if err := compile.CompileModel(m, compile.Source{Recipe: recipe}, compile.Options{ARLens: []int{16}, Ctx: 128}, bare); err != nil {
			t.Fatal(err)
		}
		e, err = engine.Open(bare)
		if err != nil {
			t.Fatal(err)
		}
		_, err = lora.ForEngine(e, "a", filepath.Join("testdata", family), 1, engine.AdapterF32)
		e.Close()
		if err == nil || !strings.Contains(err.Error(), "rotation record") {
			t.Errorf("%s: an artifact rotated without a rotation record: %v, want an error naming the record", family, err)
		}
		named := []lora.Named{{Name: "c", Spec: lora.Spec{Path: filepath.Join("testdata", family), Scale: 1}}}
		err = compile.CompileModel(m, compile.Source{Recipe: recipe}, compile.Options{ARLens: []int{16}, Ctx: 128, Carry: named}, filepath.Join(t.TempDir(), "c.aot"))
		if err == nil || !strings.Contains(err.Error(), "rotation record") {
			t.Errorf("%s: carrying an adapter on weights rotated without a rotation record: %v, want an error naming the record", family, err)
		}
	}
}

// TestRunTimeRWKV7 applies a random PEFT adapter naming the PyTorch
// checkpoint's modules (every projection of the time and channel mixing
// the loader keeps as stored) to the RWKV-7 fixture at run time, against
// the adapter merged by compile --lora: within roundingBound; a GGUF
// adapter is refused, naming why.
func TestRunTimeRWKV7(t *testing.T) {
	pth := testutil.Path(t, "rwkv/260123_reverse_L2_only_rwkv7.pth")
	tokens := []int{1, 5, 9, 2, 7, 3, 11, 4}
	dir := writeRandomFor(t, pth, "rwkv7", false, nil)
	comp := func(specs []lora.Spec) *engine.Engine {
		out := filepath.Join(t.TempDir(), "m.aot")
		if err := compile.CompileFile(pth, out, compile.Options{ARLens: []int{16}, Ctx: 64, LoRA: specs}); err != nil {
			t.Fatal(err)
		}
		e, err := engine.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	me := comp([]lora.Spec{{Path: dir, Scale: 1}})
	merged := allLogits(t, me, nil, 0, tokens)
	me.Close()
	e := comp(nil)
	defer e.Close()
	plain := allLogits(t, e, nil, 0, tokens)
	ad, err := lora.ForEngine(e, "a", dir, 1, engine.AdapterF32)
	if err != nil {
		t.Fatal(err)
	}
	d, moved := lora.MaxDiff(allLogits(t, e, ad, 1, tokens), merged), lora.MaxDiff(plain, merged)
	t.Logf("rwkv7: run time vs merged max |logit diff| %.3g; the adapter moves the logits by %.3g", d, moved)
	if d > roundingBound(0, moved) {
		t.Errorf("rwkv7: run-time logits differ from the merged adapter's by %.3g", d)
	}
	if moved < 0.01 {
		t.Errorf("rwkv7: the adapter moves the logits by only %.3g", moved)
	}
	_, err = lora.ForEngine(e, "g", filepath.Join("testdata", "llama", "adapter.gguf"), 1, engine.AdapterF32)
	if err == nil || !strings.Contains(err.Error(), "GGUF") && !strings.Contains(err.Error(), "gguf") {
		t.Errorf("a GGUF adapter on RWKV-7: %v, want an error naming the layout", err)
	}
}

// TestConvertedFamiliesCrossLayout applies adapters across layouts to
// the families that convert their Hugging Face weights on load into
// their GGUF files' layout (Qwen3.5's value heads, Granite 4 hybrid's
// q and k rows): a random PEFT adapter, and the same adapter written as
// a GGUF adapter (ToGGUF: llama.cpp's names and layout), each on the
// Hugging Face folder and on llama.cpp's GGUF file, merged and at run
// time, against the PEFT adapter merged into the Hugging Face folder:
// within roundingBound on the folder, and within what the GGUF file
// costs the base on it; the adapter must move the logits.
func TestConvertedFamiliesCrossLayout(t *testing.T) {
	for _, family := range []string{"qwen35", "granitehybrid"} {
		tokens := []int{1, 5, 9, 2, 7, 3, 11, 4}
		paths := testutil.ArchModelPaths(t, family)
		// Granite 4 hybrid's fused shared-MLP input is two tensors in
		// GGUF files: an adapter on it has no GGUF form
		peft := writeRandomFor(t, paths["hf"], family, false, func(n string) bool { return strings.Contains(n, "shared_mlp.input_linear") })
		a, err := lora.Read(peft)
		if err != nil {
			t.Fatal(err)
		}
		ck, err := detect.Open(paths["hf"])
		if err != nil {
			t.Fatal(err)
		}
		src, err := arch.Open(ck)
		if err != nil {
			ck.Close()
			t.Fatal(err)
		}
		pairs, alpha, err := lora.ToGGUF(a, &src.Config, src.Shapes)
		ck.Close()
		if err != nil {
			t.Fatal(err)
		}
		gg := filepath.Join(t.TempDir(), family+"-adapter.gguf")
		if err := lora.WriteGGUF(gg, family, alpha, pairs, false); err != nil {
			t.Fatal(err)
		}
		logitsOf := func(path string, specs []lora.Spec) []float32 {
			out := filepath.Join(t.TempDir(), "m.aot")
			if err := compile.CompileFile(path, out, compile.Options{ARLens: []int{16}, Ctx: 128, LoRA: specs}); err != nil {
				t.Fatal(err)
			}
			e, err := engine.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			return allLogits(t, e, nil, 0, tokens)
		}
		want := logitsOf(paths["hf"], []lora.Spec{{Path: peft, Scale: 1}})
		moved := lora.MaxDiff(logitsOf(paths["hf"], nil), want)
		if moved < 0.01 {
			t.Errorf("%s: the adapter moves the logits by only %.3g", family, moved)
		}
		for _, base := range []string{"hf", "gguf"} {
			cost := lora.MaxDiff(logitsOf(paths[base], nil), logitsOf(paths["hf"], nil))
			tol := roundingBound(0, moved) + 2*cost
			out := filepath.Join(t.TempDir(), base+".aot")
			if err := compile.CompileFile(paths[base], out, compile.Options{ARLens: []int{16}, Ctx: 128}); err != nil {
				t.Fatal(err)
			}
			e, err := engine.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, ad := range []string{peft, gg} {
				d := lora.MaxDiff(logitsOf(paths[base], []lora.Spec{{Path: ad, Scale: 1}}), want)
				r, err := lora.ForEngine(e, filepath.Base(ad), ad, 1, engine.AdapterF32)
				if err != nil {
					t.Fatalf("%s %s base, adapter %s: %v", family, base, filepath.Base(ad), err)
				}
				dr := lora.MaxDiff(allLogits(t, e, r, 1, tokens), want)
				t.Logf("%s %s base, adapter %s: merged %.3g, run time %.3g from the PEFT adapter merged into the folder (the base costs %.3g; the adapter moves the logits by %.3g)", family, base, filepath.Base(ad), d, dr, cost, moved)
				if d > tol || dr > tol {
					t.Errorf("%s %s base, adapter %s: merged %.3g, run time %.3g from the PEFT adapter merged into the folder, over %.3g", family, base, filepath.Base(ad), d, dr, tol)
				}
			}
			e.Close()
		}
	}
}
