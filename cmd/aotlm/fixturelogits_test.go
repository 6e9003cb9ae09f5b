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

// logitsFixtureRunner returns a function that runs `aotlm logits --json`
// on a model in a mode with ref's tokens and returns the logits, after
// checking there is a row of the reference's length for each position.
func logitsFixtureRunner(t *testing.T, ref testutil.ArchReference) func(model, mode string) [][]float32 {
	ids := make([]string, len(ref.Tokens))
	for i, id := range ref.Tokens {
		ids[i] = fmt.Sprint(id)
	}
	idArg := strings.Join(ids, ",")
	return func(model, mode string) [][]float32 {
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
}

// maxLogitDiff returns the largest |got - want| over all rows.
func maxLogitDiff(got, want [][]float32) float64 {
	var d float64
	for i := range want {
		for j, w := range want[i] {
			d = math.Max(d, math.Abs(float64(got[i][j]-w)))
		}
	}
	return d
}

// relRMSLogitError returns the RMS of got - want over the RMS of want.
func relRMSLogitError(got, want [][]float32) float64 {
	var num, den float64
	for i := range want {
		for j, w := range want[i] {
			d := float64(got[i][j] - w)
			num += d * d
			den += float64(w) * float64(w)
		}
	}
	return math.Sqrt(num / den)
}

// logitsFamily is one family's fixture for checkLogitsFamily.
type logitsFamily struct {
	name string  // the fixture is arch/<name>
	dir  string  // the HF folder compiled and quantized; arch/<name> when empty
	tol  float64 // max |logit diff| from the reference
	// quantized, when set, checks more on the quantized folder's
	// interpreter logits q.
	quantized func(t *testing.T, ref testutil.ArchReference, q [][]float32)
}

// checkLogitsFamily runs `aotlm logits` on f's HF folder, the fixture's
// GGUF (when it has one) and an artifact compiled with AR-8 prefill passes
// (shorter than the prompt), the folder and the artifact in both modes,
// and compares every position with the reference logits (llama.cpp's, or
// an HF transcription's) within f.tol. Then it quantizes the folder with
// w4a16-lpbq (the recipe the int8 tolerance was set for), compiles the result with float and with int8 activations, and
// compares with the quantized folder's logits through the interpreter:
// within 1e-5 relative RMS error with float activations, 0.1 with int8.
func checkLogitsFamily(t *testing.T, f logitsFamily) {
	t.Helper()
	ref := testutil.ReadArchReference(t, f.name)
	fixture := testutil.Path(t, "arch/"+f.name)
	dir := f.dir
	if dir == "" {
		dir = fixture
	}
	tmp := t.TempDir()
	aot := filepath.Join(tmp, f.name+".aot")
	if code, _, stderr := runCLI(t, "compile", dir, "-o", aot, "--ar-len", "8", "--ctx", "64"); code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	logits := logitsFixtureRunner(t, ref)
	runs := [][]string{{dir, "hybrid"}, {dir, "kv"}, {aot, "hybrid"}, {aot, "kv"}}
	if gguf, ok := testutil.ArchModelPaths(t, f.name)["gguf"]; ok {
		runs = append(runs, []string{gguf, "hybrid"})
	}
	for _, c := range runs {
		d := maxLogitDiff(logits(c[0], c[1]), ref.Logits)
		t.Logf("%s %s: max |logit diff| %.3g", c[0], c[1], d)
		if d > f.tol {
			t.Errorf("%s %s: logits differ from the reference by %.3g (tolerance %g)", c[0], c[1], d, f.tol)
		}
	}

	q := filepath.Join(tmp, "q")
	if code, _, stderr := runCLI(t, "quantize", dir, "-o", q, "--recipe", "w4a16-lpbq"); code != 0 {
		t.Fatalf("quantize: exit %d: %s", code, stderr)
	}
	want := logits(q, "hybrid") // the quantized weights through the interpreter
	if f.quantized != nil {
		f.quantized(t, ref, want)
	}
	for _, c := range []struct {
		activations string
		tol         float64 // relative RMS error
	}{{"float", 1e-5}, {"int8", 0.1}} {
		qaot := filepath.Join(tmp, "q-"+c.activations+".aot")
		if code, _, stderr := runCLI(t, "compile", q, "-o", qaot, "--ar-len", "8", "--ctx", "64", "--activations", c.activations); code != 0 {
			t.Fatalf("compile the quantized folder: exit %d: %s", code, stderr)
		}
		rel := relRMSLogitError(logits(qaot, "hybrid"), want)
		t.Logf("quantized artifact, %s activations: relative RMS logit error %.3g", c.activations, rel)
		if !(rel < c.tol) {
			t.Errorf("quantized artifact, %s activations: relative RMS logit error %.3g from the interpreter, want below %g", c.activations, rel, c.tol)
		}
	}
}
