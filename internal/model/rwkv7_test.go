package model_test

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/decoding"
	"github.com/aotlm/aotlm/internal/model"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/testutil"
)

const rwkv7Checkpoint = "rwkv/260123_reverse_L2_only_rwkv7.pth"

// rwkv7Tol is the README's suggested tolerance: the float32 reference and
// a float64 run of the same code differ by up to 4.3e-4.
const rwkv7Tol = 2e-3

type rwkv7Case struct {
	Tokens []int       `json:"tokens"`
	Logits [][]float32 `json:"logits"`
	Prompt []int       `json:"prompt"`
	Greedy []int       `json:"greedy"`
}

func rwkv7Ref(t *testing.T) rwkv7Case {
	var ref struct{ Cases []rwkv7Case }
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/rwkv7/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Cases) == 0 || len(ref.Cases[0].Logits) != 128 {
		t.Fatal("reference.json: want one case of 128 logit rows")
	}
	return ref.Cases[0]
}

// rwkv7Artifact compiles the checkpoint with AR-1 and AR-32 plans.
func rwkv7Artifact(t *testing.T) string {
	out := filepath.Join(t.TempDir(), "rwkv7.aot")
	if err := compile.CompileFile(testutil.Path(t, rwkv7Checkpoint), out, compile.Options{ARLens: []int{32}, Ctx: 256}); err != nil {
		t.Fatal(err)
	}
	return out
}

func maxDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// checkSplits feeds the first p tokens in one Prefill (for an artifact in
// hybrid mode: AR-32 passes, the last one padded unless 32 divides p) and
// the rest one Decode at a time, comparing every position's logits with
// the reference; it returns the largest difference.
func checkSplits(t *testing.T, m sessions, ref rwkv7Case, splits []int) float64 {
	t.Helper()
	var worst float64
	toks := ref.Tokens[:len(ref.Logits)]
	for _, p := range splits {
		s := m(t)
		out, err := s.Prefill(toks[:p])
		if err != nil {
			t.Fatal(err)
		}
		worst = math.Max(worst, maxDiff(out, ref.Logits[p-1]))
		for i := p; i < len(toks); i++ {
			if out, err = s.Decode(toks[i]); err != nil {
				t.Fatal(err)
			}
			worst = math.Max(worst, maxDiff(out, ref.Logits[i]))
		}
	}
	return worst
}

// TestRWKV7Reference checks the real RWKV-7 checkpoint against BlinkDL's
// script (arch/rwkv7/reference.json): all 128 positions' logits within
// 2e-3 and the greedy answer, through the interpreter (one pass, and split
// into a prefill plus single-token steps so the state carries over) and
// through a compiled f32 artifact in hybrid (AR-32, padded last pass) and
// kv modes.
func TestRWKV7Reference(t *testing.T) {
	ref := rwkv7Ref(t)
	splits := []int{1, 13, 32, 45, 64, 100, 128}
	im, err := model.Open(testutil.Path(t, rwkv7Checkpoint), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := im.NewSession(256)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.Logits(ref.Tokens[:128])
	if err != nil {
		t.Fatal(err)
	}
	var d float64
	for i := range rows {
		d = math.Max(d, maxDiff(rows[i], ref.Logits[i]))
	}
	t.Logf("interpreter, one pass: max |logit diff| %.3g", d)
	if d > rwkv7Tol {
		t.Errorf("interpreter logits differ by %.3g (tolerance %g)", d, rwkv7Tol)
	}
	if d := checkSplits(t, interpSessions(im), ref, []int{1, 45, 127}); d > rwkv7Tol {
		t.Errorf("interpreter, split: logits differ by %.3g", d)
	}
	checkGreedy(t, "interpreter", interpSessions(im), ref)

	aot := rwkv7Artifact(t)
	for _, mode := range []string{"hybrid", "kv"} {
		am := artifactSessions(t, aot, mode)
		d := checkSplits(t, am, ref, splits)
		t.Logf("artifact %s, prefill splits %v: max |logit diff| %.3g", mode, splits, d)
		if d > rwkv7Tol {
			t.Errorf("artifact %s: logits differ by %.3g (tolerance %g)", mode, d, rwkv7Tol)
		}
		checkGreedy(t, "artifact "+mode, am, ref)
	}
}

func checkGreedy(t *testing.T, what string, m sessions, ref rwkv7Case) {
	t.Helper()
	res, err := decoding.Generate(m(t), ref.Prompt, decoding.Options{MaxTokens: len(ref.Greedy)})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.IDs, ref.Greedy) {
		t.Errorf("%s: greedy %v, reference %v", what, res.IDs, ref.Greedy)
	}
}

// TestRWKV7Reverses checks the task the checkpoint was trained on: for
// every length 1..60, a seeded random number (no leading zero) followed by
// ',' is answered greedily with its digits reversed and '#' (id 11),
// through the compiled artifact in hybrid mode (AR-32) for every length,
// and through the interpreter and the artifact's kv mode for a subset.
func TestRWKV7Reverses(t *testing.T) {
	aot := rwkv7Artifact(t)
	hyb := artifactSessions(t, aot, "hybrid")
	kv := artifactSessions(t, aot, "kv")
	imm, err := model.Open(testutil.Path(t, rwkv7Checkpoint), model.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 60))
	wrong := 0
	for n := 1; n <= 60; n++ {
		digits := make([]int, n)
		for i := range digits {
			digits[i] = rng.IntN(10)
		}
		if digits[0] == 0 {
			digits[0] = 1 + rng.IntN(9)
		}
		prompt := append(slices.Clone(digits), 10)
		want := append(slices.Clone(digits), 11)
		slices.Reverse(want[:n])
		models := []sessions{hyb}
		if n%7 == 1 || n == 60 {
			models = append(models, kv, interpSessions(imm))
		}
		for i, m := range models {
			res, err := decoding.Generate(m(t), prompt, decoding.Options{MaxTokens: n + 1})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.IDs, want) {
				wrong++
				t.Errorf("length %d, model %d: %v -> %v, want %v", n, i, digits, res.IDs, want)
			}
		}
	}
	t.Logf("60 lengths reversed, %d wrong", wrong)
}

// sessions makes fresh sessions of 256 positions of one model.
type sessions func(t *testing.T) decoding.Session

// interpSessions makes sessions of m on the interpreter.
func interpSessions(m *model.Model) sessions {
	return func(t *testing.T) decoding.Session {
		s, err := m.NewSession(256)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
}

// artifactSessions makes engine sessions of the artifact at path.
func artifactSessions(t *testing.T, path, mode string) sessions {
	m, err := aotlm.Open(path, aotlm.Options{Mode: mode, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return func(t *testing.T) decoding.Session {
		s, err := m.NewSession(256)
		if err != nil {
			t.Fatal(err)
		}
		return s.Sequence().(decoding.Session)
	}
}

// TestRWKV7Quantized checks the quantized path on the real RWKV-7: a
// w8a16 folder (its manifest validated by RWKV-7's own rule, which has no
// rope) still answers the reference prompt greedily, through the
// interpreter and through an artifact compiled with float activations;
// and a w4a16-lpbq folder, whose recipe asks for a uint8 KV cache the
// recurrent model does not have, compiles (the cache dtype is ignored) to
// an artifact whose logits over the reference tokens are the
// interpreter's over the same dequantized weights.
func TestRWKV7Quantized(t *testing.T) {
	ref := rwkv7Ref(t)
	src := testutil.Path(t, rwkv7Checkpoint)
	dir := t.TempDir()
	for _, name := range []string{"w8a16", "w4a16-lpbq"} {
		r, err := quant.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		q := filepath.Join(dir, name)
		if _, err := qmodel.Quantize(src, q, qmodel.Options{Recipe: r}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := qmodel.ReadManifest(q); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		im, err := model.Open(q, model.Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		aot := filepath.Join(dir, name+".aot")
		if err := compile.CompileFile(q, aot, compile.Options{ARLens: []int{32}, Ctx: 256, KV: "u8", FloatActivations: true}); err != nil {
			t.Fatalf("%s: compile with a u8 KV cache: %v", name, err)
		}
		am := artifactSessions(t, aot, "hybrid")
		if name == "w8a16" {
			checkGreedy(t, name+" interpreter", interpSessions(im), ref)
			checkGreedy(t, name+" artifact", am, ref)
			continue
		}
		s, err := im.NewSession(256)
		if err != nil {
			t.Fatal(err)
		}
		toks := ref.Tokens[:64]
		rows, err := s.Logits(toks)
		if err != nil {
			t.Fatal(err)
		}
		want := rwkv7Case{Tokens: toks, Logits: rows}
		d := checkSplits(t, am, want, []int{1, 40, 64})
		t.Logf("%s: artifact vs interpreter, max |logit diff| %.3g", name, d)
		if d > rwkv7Tol {
			t.Errorf("%s: the artifact's logits differ from the interpreter's by %.3g", name, d)
		}
	}
}
