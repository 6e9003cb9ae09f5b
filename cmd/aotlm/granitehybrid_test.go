package main

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// TestLogitsGraniteHybrid runs `aotlm logits` on the granitehybrid fixture
// (Mamba2 layers between attention layers) from its HF folder, its GGUF and
// an artifact compiled with AR-8 prefill passes (shorter than the prompt)
// in both modes, and compares every position with llama.cpp's logits
// within the fixture tolerance 1e-3. Then it quantizes the folder with the
// default recipe, compiles the result with float and with int8
// activations, and compares with the quantized folder's logits through the
// interpreter: equal within 1e-5 relative RMS error with float
// activations, within 0.1 with int8 ones (measured 0.0056); the quantized
// folder itself stays within 0.1 of llama.cpp's f32 logits.
func TestLogitsGraniteHybrid(t *testing.T) {
	var ref struct {
		Tokens []int       `json:"tokens"`
		Logits [][]float32 `json:"logits"`
	}
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/granitehybrid/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	dir := testutil.Path(t, "arch/granitehybrid")
	tmp := t.TempDir()
	aot := filepath.Join(tmp, "granitehybrid.aot")
	if code, _, stderr := runCLI(t, "compile", dir, "-o", aot, "--ar-len", "8", "--ctx", "64"); code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	ids := make([]string, len(ref.Tokens))
	for i, id := range ref.Tokens {
		ids[i] = fmt.Sprint(id)
	}
	idArg := strings.Join(ids, ",")
	logits := func(model, mode string) [][]float32 {
		t.Helper()
		out, err := runLogits("-m", model, "--ids", idArg, "--mode", mode, "--json")
		if err != nil {
			t.Fatalf("%s %s: %v", model, mode, err)
		}
		var got struct {
			Logits [][]float32 `json:"logits"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%s %s: output is not one JSON object: %v", model, mode, err)
		}
		if len(got.Logits) != len(ref.Logits) {
			t.Fatalf("%s %s: %d rows, want %d", model, mode, len(got.Logits), len(ref.Logits))
		}
		for i, row := range got.Logits {
			if len(row) != len(ref.Logits[i]) {
				t.Fatalf("%s %s: row %d has %d logits, want %d", model, mode, i, len(row), len(ref.Logits[i]))
			}
		}
		return got.Logits
	}
	for _, c := range [][]string{{dir, "hybrid"}, {filepath.Join(dir, "model.gguf"), "hybrid"}, {aot, "hybrid"}, {aot, "kv"}} {
		got := logits(c[0], c[1])
		var d float64
		for i := range ref.Logits {
			for j, want := range ref.Logits[i] {
				d = math.Max(d, math.Abs(float64(got[i][j]-want)))
			}
		}
		t.Logf("%s %s: max |logit diff| %.3g", c[0], c[1], d)
		if d > 1e-3 {
			t.Errorf("%s %s: logits differ from llama.cpp by %.3g (tolerance 1e-3)", c[0], c[1], d)
		}
	}

	q := filepath.Join(tmp, "q")
	if code, _, stderr := runCLI(t, "quantize", dir, "-o", q); code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, stderr)
	}
	want := logits(q, "hybrid") // the quantized weights through the interpreter
	// the quantized folder is still this model (its A read once as -exp(A_log))
	var num, den float64
	for i := range want {
		for j, w := range want[i] {
			d := float64(ref.Logits[i][j] - w)
			num += d * d
			den += float64(w) * float64(w)
		}
	}
	rel := math.Sqrt(num / den)
	t.Logf("quantized folder: relative RMS logit error %.3g from llama.cpp's f32 logits", rel)
	if !(rel < 0.1) {
		t.Errorf("quantized folder: relative RMS logit error %.3g from llama.cpp's f32 logits, want below 0.1", rel)
	}
	for _, c := range []struct {
		activations string
		tol         float64 // relative RMS error
	}{{"float", 1e-5}, {"int8", 0.1}} {
		qaot := filepath.Join(tmp, "q-"+c.activations+".aot")
		if code, _, stderr := runCLI(t, "compile", q, "-o", qaot, "--ar-len", "8", "--ctx", "64", "--activations", c.activations); code != 0 {
			t.Fatalf("compile the quantized folder: exit %d: %s", code, stderr)
		}
		got := logits(qaot, "hybrid")
		var num, den float64
		for i := range want {
			for j, w := range want[i] {
				d := float64(got[i][j] - w)
				num += d * d
				den += float64(w) * float64(w)
			}
		}
		rel := math.Sqrt(num / den)
		t.Logf("quantized artifact, %s activations: relative RMS logit error %.3g", c.activations, rel)
		if !(rel < c.tol) {
			t.Errorf("quantized artifact, %s activations: relative RMS logit error %.3g from the interpreter, want below %g", c.activations, rel, c.tol)
		}
	}
}
