package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// TestQuantizeCommand quantizes stories260K at w4a16-lpbq, then runs and
// tokenizes the folder: the tokenizer travels with it.
func TestQuantizeCommand(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	out := filepath.Join(t.TempDir(), "w4")
	code, stdout, stderr := runCLI(t, "quantize", src, "-o", out, "--recipe", "w4a16-lpbq", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var rep struct {
		Tensors []struct {
			Name, Scheme string
			RelErr       float64 `json:"rel_rmse"`
		}
		Params     int64
		WeightBits float64 `json:"bits_per_weight"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	lpbq := 0
	for _, tr := range rep.Tensors {
		if strings.HasPrefix(tr.Scheme, "lpbq") {
			lpbq++
			if tr.RelErr <= 0 || tr.RelErr > 0.2 {
				t.Errorf("%s: relative error %v", tr.Name, tr.RelErr)
			}
		}
	}
	if lpbq == 0 || rep.Params != 292800 || rep.WeightBits >= 32 {
		t.Fatalf("report: %d lpbq tensors, %d params, %.2f bits", lpbq, rep.Params, rep.WeightBits)
	}
	code, stdout, stderr = runCLI(t, "run", "-m", out, "-p", "Once upon a time", "-n", "8", "--temp", "0")
	if code != 0 || len(strings.Fields(stdout)) < 4 {
		t.Fatalf("run on the quantized folder: %d %q %s", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, "tokenize", "-m", out, "--json", "--", "Once upon a time")
	if code != 0 || !strings.Contains(stdout, "[403,407,261,378]") {
		t.Fatalf("tokenize on the quantized folder: %d %s", code, stdout)
	}
	// refusals: an unknown recipe, an existing output
	if code, _, stderr := runCLI(t, "quantize", src, "-o", filepath.Join(t.TempDir(), "x"), "--recipe", "w3-magic"); code != 1 || !strings.Contains(stderr, "w3-magic") {
		t.Errorf("unknown recipe: %d %s", code, stderr)
	}
	if code, _, stderr := runCLI(t, "quantize", src, "-o", out); code != 1 || !strings.Contains(stderr, "exists") {
		t.Errorf("existing output: %d %s", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "tokenizer.gguf")); err != nil {
		t.Error(err)
	}
}

// TestQuantizeLPBQReference: --lpbq-reference changes only the LPBQ
// tensors' mode, and the folder records it.
func TestQuantizeLPBQReference(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	out := filepath.Join(t.TempDir(), "ref")
	code, stdout, stderr := runCLI(t, "quantize", src, "-o", out, "--recipe", "w4a16-lpbq", "--lpbq-reference", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "lpbq/b32/reference") || strings.Contains(stdout, "lpbq/b32/refined") {
		t.Fatalf("schemes in report: %s", stdout)
	}
	man, err := os.ReadFile(filepath.Join(out, "aotlm-quant.json"))
	if err != nil || !strings.Contains(string(man), `"mode": "reference"`) {
		t.Fatalf("manifest does not record the mode: %v", err)
	}
}
