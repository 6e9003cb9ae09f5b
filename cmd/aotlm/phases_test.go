package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/recipe"
	"github.com/aotlm/aotlm/internal/testutil"
)

type phasesJSON struct {
	Phases []struct {
		Phase string  `json:"phase"`
		PPL   float64 `json:"ppl"`
		KL    float64 `json:"kl"`
		Top1  float64 `json:"top1"`
	} `json:"phases"`
	Tokens int `json:"tokens"`
}

// TestPplPhases quantizes stories260K with a GPTQ, rotated recipe
// calibrated on another text, then scores 2 chunks of 64 tokens in the
// float, qdq and artifact phases with float activations: the float phase
// is the checkpoint's own perplexity (compared with a plain ppl run), qdq
// and the compiled artifact agree within 0.1% (they compute the same
// dequantized weights and uint8 cache; only summation order differs), and
// the quantized phases have a positive KL and a top-1 agreement below 1.
// The manifest records the rotation, the calibration and GPTQ.
func TestPplPhases(t *testing.T) {
	m := testutil.Path(t, "models/stories260K/stories260K.gguf")
	data := testutil.Path(t, "text/TinyStories-valid-excerpt.txt")
	calib := testutil.Path(t, "text/war-and-peace.txt")
	dir := t.TempDir()
	recipeFile := filepath.Join(dir, "r.json")
	if err := os.WriteFile(recipeFile, []byte(`{"name": "t", "default": {"scheme": "lpbq", "block": 32},
		"overrides": [{"pattern": "lm_head.weight", "scheme": "w8"}], "kv": "u8",
		"rotation": {"r1": "random-hadamard", "r2": "hadamard", "seed": 3},
		"calibration": {"gptq": true, "awq": true, "awq_grid": 4}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	q := filepath.Join(dir, "q")
	if code, _, errOut := runCLI(t, "quantize", m, "-o", q, "--recipe", recipeFile, "--calib", calib,
		"--calib-samples", "4", "--calib-len", "32", "--json"); code != 0 {
		t.Fatalf("quantize: %s", errOut)
	}
	man, err := qmodel.ReadManifest(q)
	if err != nil {
		t.Fatal(err)
	}
	var rec recipe.Record
	if err := json.Unmarshal(man.Calibration, &rec); err != nil || rec.Rotation == nil || rec.Samples != 4 || len(rec.Ranges) == 0 {
		t.Fatalf("calibration record %s: %v", man.Calibration, err)
	}
	if !man.Tensors["model.layers.0.self_attn.q_proj.weight"].GPTQ {
		t.Error("q_proj not marked GPTQ")
	}
	code, out, errOut := runCLI(t, "ppl", "-m", q, "--data", data, "--ctx", "64", "--chunks", "2",
		"--phases", "float,qdq,artifact", "--activations", "float", "--json")
	if code != 0 {
		t.Fatalf("ppl --phases: %s", errOut)
	}
	var r phasesJSON
	if err := json.NewDecoder(strings.NewReader(out)).Decode(&r); err != nil || len(r.Phases) != 3 {
		t.Fatalf("output %q: %v", out, err)
	}
	plain, _ := pplRun(t, "-m", m, "--data", data, "--ctx", "64", "--chunks", "2")
	f, qd, art := r.Phases[0], r.Phases[1], r.Phases[2]
	t.Logf("float %.4f qdq %.4f (KL %.4f, top-1 %.3f) artifact %.4f (KL %.4f)", f.PPL, qd.PPL, qd.KL, qd.Top1, art.PPL, art.KL)
	if f.PPL != plain.PPL || f.KL != 0 || f.Top1 != 1 || r.Tokens != plain.Tokens {
		t.Errorf("float phase %+v, plain ppl %v over %d tokens", f, plain.PPL, plain.Tokens)
	}
	if math.Abs(qd.PPL-art.PPL) > 1e-3*art.PPL || math.Abs(qd.KL-art.KL) > 0.05*art.KL {
		t.Errorf("qdq %+v and artifact %+v differ", qd, art)
	}
	if !(qd.KL > 0 && qd.Top1 < 1 && qd.PPL > f.PPL*0.9) {
		t.Errorf("quantized phase %+v", qd)
	}
	// refusals: an unknown phase, a float checkpoint for a quantized phase
	if code, _, errOut := runCLI(t, "ppl", "-m", q, "--data", data, "--phases", "float,bogus"); code == 0 || !strings.Contains(errOut, "bogus") {
		t.Errorf("unknown phase: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runCLI(t, "ppl", "-m", m, "--data", data, "--phases", "qdq"); code == 0 || !strings.Contains(errOut, "quantized model folder") {
		t.Errorf("qdq of a checkpoint: exit %d, %s", code, errOut)
	}
}
