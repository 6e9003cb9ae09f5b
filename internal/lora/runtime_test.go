package lora_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/lora"
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
				for _, half := range []bool{false, true} {
					ad, err := lora.ForEngine(e, "a", filepath.Join("testdata", family, file), 1, half)
					if err != nil {
						t.Fatal(err)
					}
					for scale, ref := range want {
						d := lora.MaxDiff(allLogits(t, e, ad, float32(scale), o.Tokens), ref)
						t.Logf("%s %s base, adapter %q (half %v) at %g: max |logit diff| %.3g", family, src, file, half, scale, d)
						// binary16 rounds A and B: the llama fixture's
						// logits (up to 55) move by up to 25
						tol := 1e-3
						if half {
							tol = 0.02
						}
						if d > tol {
							t.Errorf("%s %s base, adapter %q (half %v) at %g: logits differ from llama.cpp's by %.3g", family, src, file, half, scale, d)
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
