package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/testutil"
)

// rwkv7Task is the digit-reversal task of the tiny real RWKV-7, in
// docs/rwkv7-reverse: its 12-token tokenizer, evaluation items and
// calibration text.
func rwkv7Task(name string) string { return filepath.Join("..", "..", "docs", "rwkv7-reverse", name) }

type lambadaPhasesJSON struct {
	Phases []struct {
		Phase    string  `json:"phase"`
		Acc      float64 `json:"acc"`
		PPL      float64 `json:"ppl"`
		TokenPPL float64 `json:"token_ppl"`
		KL       float64 `json:"kl"`
		Top1     float64 `json:"top1"`
	} `json:"phases"`
	Items  int `json:"items"`
	Tokens int `json:"tokens"`
}

// TestEvalLambadaPhases quantizes the tiny real RWKV-7 (w8a16, and
// lpbq-gptq calibrated on the task's calibration sequences), then scores
// 60 digit-reversal items with eval --task lambada --phases: the float
// checkpoint answers every item (as BlinkDL reports for it) with KL 0;
// the w8a16 qdq phase with float activations also does, at a small
// positive KL; the compiled artifact agrees with qdq; and the plain eval
// of the float checkpoint gives the float phase's figures.
func TestEvalLambadaPhases(t *testing.T) {
	m := testutil.Path(t, "rwkv/260123_reverse_L2_only_rwkv7.pth")
	tok, data, calib := rwkv7Task("tokenizer.json"), rwkv7Task("eval.jsonl"), rwkv7Task("calib.txt")
	dir := t.TempDir()
	q := filepath.Join(dir, "w8")
	if code, _, errOut := runCLI(t, "quantize", m, "-o", q, "--recipe", "w8a16", "--tokenizer", tok); code != 0 {
		t.Fatalf("quantize: %s", errOut)
	}
	code, out, errOut := runCLI(t, "eval", "-m", q, "--task", "lambada", "--data", data, "--limit", "60",
		"--phases", "float,qdq,artifact", "--activations", "float", "--json")
	if code != 0 {
		t.Fatalf("eval --phases: %s", errOut)
	}
	var r lambadaPhasesJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// items 1..60 are 12 lengths (1..12 digits) x 5; each answer is its
	// digits and '#'
	if r.Items != 60 || r.Tokens != 5*(12*13/2+12) || len(r.Phases) != 3 {
		t.Fatalf("%d items, %d tokens, %d phases", r.Items, r.Tokens, len(r.Phases))
	}
	f, qd, a := r.Phases[0], r.Phases[1], r.Phases[2]
	if f.Acc != 1 || f.KL != 0 || f.Top1 != 1 || f.TokenPPL > 1.01 {
		t.Errorf("float phase %+v", f)
	}
	if qd.Acc != 1 || !(qd.KL > 0 && qd.KL < 1e-2) || qd.Top1 != 1 {
		t.Errorf("w8a16 qdq phase %+v", qd)
	}
	if a.Acc != qd.Acc || math.Abs(a.KL-qd.KL) > 1e-4 || math.Abs(a.TokenPPL-qd.TokenPPL) > 1e-4 {
		t.Errorf("artifact %+v, qdq %+v", a, qd)
	}
	code, out, errOut = runCLI(t, "eval", "-m", m, "--tokenizer", tok, "--task", "lambada", "--data", data, "--limit", "60", "--json")
	if code != 0 {
		t.Fatalf("eval: %s", errOut)
	}
	var plain struct{ Acc, PPL float64 }
	if err := json.Unmarshal([]byte(out), &plain); err != nil {
		t.Fatal(err)
	}
	if plain.Acc != f.Acc || math.Abs(plain.PPL-f.PPL) > 1e-9 {
		t.Errorf("plain eval acc %v ppl %v, float phase %v %v", plain.Acc, plain.PPL, f.Acc, f.PPL)
	}

	// calibration runs on RWKV-7: GPTQ over the task's calibration text
	g := filepath.Join(dir, "gptq")
	if code, _, errOut := runCLI(t, "quantize", m, "-o", g, "--recipe", "../../docs/recipes/lpbq-gptq.json", "--tokenizer", tok,
		"--calib", calib, "--calib-len", "128", "--calib-samples", "8"); code != 0 {
		t.Fatalf("quantize --calib: %s", errOut)
	}
	man, err := qmodel.ReadManifest(g)
	if err != nil {
		t.Fatal(err)
	}
	if !man.Tensors["rwkv1.key.weight"].GPTQ {
		t.Error("rwkv1.key.weight not marked GPTQ")
	}
	if code, out, errOut := runCLI(t, "eval", "-m", g, "--task", "lambada", "--data", data, "--limit", "5",
		"--phases", "float,qdq,artifact"); code != 0 || !strings.Contains(out, "artifact") {
		t.Errorf("eval --phases of the GPTQ folder: %s%s", out, errOut)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "-m", q, "--task", "hellaswag", "--data", data, "--phases", "float,qdq"}, "lambada only"},
		{[]string{"eval", "-m", m, "--tokenizer", tok, "--task", "lambada", "--data", data, "--phases", "float,qdq"}, "quantized model folder"},
		{[]string{"eval", "-m", q, "--task", "lambada", "--data", data, "--phases", "float,gpu"}, "unknown phase"},
		{[]string{"eval", "-m", q, "--task", "lambada", "--data", data, "--phases", "float", "--activations", "int4"}, "--activations"},
	} {
		if code, _, errOut := runCLI(t, c.args...); code == 0 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q, want an error with %q", c.args, code, errOut, c.want)
		}
	}
}
