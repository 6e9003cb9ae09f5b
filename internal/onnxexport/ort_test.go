package onnxexport

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/eval"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/qdq"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// ortDir is the folder of the ONNX Runtime script and its npm package.
func ortDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(testutil.RepoRoot(), "internal", "onnxexport", "testdata", "ort")
	_, errNode := exec.LookPath("node")
	_, errPkg := os.Stat(filepath.Join(dir, "node_modules", "onnxruntime-node", "package.json"))
	if errNode != nil || errPkg != nil {
		msg := "ONNX Runtime is not installed (node and `npm ci` in internal/onnxexport/testdata/ort)"
		if testutil.InCI() {
			t.Fatalf("%s: CI=true, so this is a failure", msg)
		}
		t.Skip(msg)
	}
	return dir
}

type ortResult struct {
	Logits [][]float32 `json:"logits"`
	IDs    []int       `json:"ids"`
}

// runORT runs the export in dir with ONNX Runtime: tokens through the
// graphs, then generate greedy steps.
func runORT(t *testing.T, dir string, tokens []int, generate int) ortResult {
	t.Helper()
	script := ortDir(t)
	job := filepath.Join(t.TempDir(), "job.json")
	out := filepath.Join(t.TempDir(), "out.json")
	b, _ := json.Marshal(map[string]any{"dir": dir, "tokens": tokens, "generate": generate})
	if err := os.WriteFile(job, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join(script, "run.mjs"), job, out)
	cmd.Dir = script
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ONNX Runtime: %v\n%s", err, msg)
	}
	var r ortResult
	b, err := os.ReadFile(out)
	if err == nil {
		err = json.Unmarshal(b, &r)
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func loadModel(t *testing.T, rel string) *arch.Model {
	t.Helper()
	ck, err := detect.Open(testutil.Path(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := arch.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// greedyRef runs tokens through the interpreter in one pass, then
// generate greedy steps, returning every row's logits and the ids.
func greedyRef(t *testing.T, m *arch.Model, tokens []int, generate, ctx int) ortResult {
	t.Helper()
	g, err := arch.Build(&m.Config, arch.BuildOptions{AllLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	in, err := graph.NewInterpreter(g, m.Weights, 1)
	if err != nil {
		t.Fatal(err)
	}
	st := in.NewState(ctx)
	V := m.Config.Vocab
	var r ortResult
	out, rows, err := in.Run(st, tokens)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < rows; i++ {
		r.Logits = append(r.Logits, append([]float32(nil), out[i*V:(i+1)*V]...))
	}
	for s := 0; s < generate; s++ {
		id := argmax(r.Logits[len(r.Logits)-1])
		r.IDs = append(r.IDs, id)
		out, _, err := in.Run(st, []int{id})
		if err != nil {
			t.Fatal(err)
		}
		r.Logits = append(r.Logits, append([]float32(nil), out[:V]...))
	}
	return r
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// maxDiff is the largest absolute difference between two logit matrices.
func maxDiff(t *testing.T, a, b [][]float32) float64 {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d rows of logits against %d", len(a), len(b))
	}
	d := 0.0
	for i := range a {
		if len(a[i]) != len(b[i]) {
			t.Fatalf("row %d: %d logits against %d", i, len(a[i]), len(b[i]))
		}
		for j := range a[i] {
			d = max(d, abs64(float64(a[i][j])-float64(b[i][j])))
		}
	}
	return d
}

func abs64(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestFloatExportMatchesInterpreter exports stories260K and wp-llama with
// float weights and activations, runs both graphs with ONNX Runtime (a
// prompt of 13 tokens over AR-8 prefill passes, the last padded, then 64
// greedy AR-1 steps) and requires the interpreter's greedy ids and its
// logits within 1e-3.
func TestFloatExportMatchesInterpreter(t *testing.T) {
	for _, c := range []struct{ name, rel string }{
		{"stories260K", "models/stories260K/stories260K.gguf"},
		{"wp-llama", "models/wp-llama"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ortDir(t)
			m := loadModel(t, c.rel)
			dir := t.TempDir()
			const ctx = 96
			if err := Export(dir, m, Options{ARLen: 8, Context: ctx, Producer: "aotlm-test"}); err != nil {
				t.Fatal(err)
			}
			prompt := []int{1, 403, 407, 261, 378, 285, 260, 112, 274, 290, 302, 311, 46}
			want := greedyRef(t, m, prompt, 64, ctx)
			got := runORT(t, dir, prompt, 64)
			for i := range want.IDs {
				if i >= len(got.IDs) || got.IDs[i] != want.IDs[i] {
					t.Fatalf("greedy ids differ at step %d:\nort    %v\naotlm  %v", i, got.IDs, want.IDs)
				}
			}
			d := maxDiff(t, got.Logits, want.Logits)
			t.Logf("%d ids equal, max |logit diff| %.2e over %d rows", len(want.IDs), d, len(want.Logits))
			if d > 1e-3 {
				t.Fatalf("logits differ by %.3g > 1e-3", d)
			}
		})
	}
}

// quantizeModel quantizes the test model rel with a preset recipe into a
// temporary folder.
func quantizeModel(t *testing.T, rel, preset string) string {
	t.Helper()
	r, err := quant.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), preset)
	if _, err := qmodel.Quantize(testutil.Path(t, rel), out, qmodel.Options{Recipe: r}); err != nil {
		t.Fatal(err)
	}
	return out
}

// textTokens returns the first n tokens of the test text rel from byte
// offset from on, with the model's tokenizer, BOS first.
func textTokens(t *testing.T, modelPath, rel string, from, n int) []int {
	t.Helper()
	tok, err := load.Tokenizer(modelPath, modelPath)
	if err != nil {
		t.Fatal(err)
	}
	b := testutil.ReadFile(t, rel)
	if from > len(b) {
		t.Fatalf("%s has %d bytes, not %d", rel, len(b), from)
	}
	b = b[from:min(len(b), from+32*n)] // 32 bytes a token is ample for a 512-token vocabulary
	ids := tok.Encode(string(b), tokenizer.EncodeOptions{AddSpecial: true})
	if len(ids) < n {
		t.Fatalf("%s from byte %d has %d tokens, want %d", rel, from, len(ids), n)
	}
	return ids[:n]
}

// qdqMaxTol and qdqMeanTol bound the largest and the mean absolute logit
// difference between ONNX Runtime running a QDQ export with 16-bit
// activations and the interpreter's `npu` simulation of it. The 16-bit
// scales are float32 in the graph and float64 in the simulation, which
// moves about one activation in 250 by one 16-bit step; a key or value
// moved that way can then round to the neighbouring step of the coarse
// uint8 cache, so the difference is that of a few 8-bit steps, not of a
// float32 rounding (with float activations the two agree within 1e-4).
const (
	qdqMaxTol  = 0.5
	qdqMeanTol = 0.025
)

// meanDiff returns the mean absolute difference of two logit matrices of
// the same shape and the share of rows with the same argmax.
func meanDiff(a, b [][]float32) (mean, top1 float64) {
	n, same := 0, 0
	for i := range a {
		for j := range a[i] {
			mean += abs64(float64(a[i][j]) - float64(b[i][j]))
			n++
		}
		if argmax(a[i]) == argmax(b[i]) {
			same++
		}
	}
	return mean / float64(n), float64(same) / float64(len(a))
}

// TestQDQExportMatchesSimulation quantizes stories260K and wp-llama with
// w4a16-lpbq, exports them in QDQ form (LPBQ and W8 weights, 16-bit
// activations over the calibrated ranges, uint8 cache) and with float
// activations, and requires ONNX Runtime's logits over 192 tokens of each
// model's test text
// to match the interpreter's `npu` and `qdq` simulations (the sessions
// `ppl --phases npu,qdq` score) within the stated tolerances, and the
// perplexity of 16 chunks of 256 tokens, scored as `ppl` scores, within
// 0.5%; the export as written (16-bit linear outputs too) within 0.5%, and
// calibrated on 256 tokens of other text no more than 0.5% above.
func TestQDQExportMatchesSimulation(t *testing.T) {
	for _, c := range []struct {
		name, rel, text string
		from, calib     int // the scored text's byte offset; the calibration text's after it
	}{
		{"stories260K", "models/stories260K/stories260K.gguf", "text/TinyStories-valid-excerpt.txt", 0, 22000},
		// wp-llama's held-out tenth of War and Peace (its README)
		{"wp-llama", "models/wp-llama", "text/war-and-peace.txt", 2882089, 100000},
	} {
		t.Run(c.name, func(t *testing.T) {
			ortDir(t)
			const ctx, n = 256, 192
			dir := quantizeModel(t, c.rel, "w4a16-lpbq")
			text := textTokens(t, testutil.Path(t, c.rel), c.text, c.from, 16*ctx)
			ids := text[:n]
			for _, act := range []bool{true, false} {
				q, err := OpenQuantized(dir, ctx, act)
				if err != nil {
					t.Fatal(err)
				}
				// the npu phase rounds the linears' inputs, not their
				// outputs: this export leaves them float, the device
				// form (dev) has them too
				outputs := q.QDQ.Outputs
				q.QDQ.Outputs = nil
				out, dev, cal := t.TempDir(), t.TempDir(), t.TempDir()
				err = Export(out, q.Model, Options{ARLen: 32, Context: ctx, Quant: q.QDQ})
				sim := &qdq.Sim{Static16: q.QDQ.Activations, KV: q.QDQ.KV}
				if err == nil && act {
					q.QDQ.Outputs = outputs
					err = Export(dev, q.Model, Options{ARLen: 32, Context: ctx, Quant: q.QDQ})
				}
				if err == nil && act {
					// calibrated on text the scored chunks do not hold
					err = q.CalibrateOn(textTokens(t, testutil.Path(t, c.rel), c.text, c.from+c.calib, ctx))
					if err == nil {
						err = Export(cal, q.Model, Options{ARLen: 32, Context: ctx, Quant: q.QDQ})
					}
				}
				q.Close()
				if err != nil {
					t.Fatal(err)
				}
				s, err := qdq.NewSession(q.Model, ctx, 1, sim)
				if err != nil {
					t.Fatal(err)
				}
				want, err := s.Logits(ids)
				if err != nil {
					t.Fatal(err)
				}
				got := runORT(t, out, ids, 0)
				d := maxDiff(t, got.Logits, want)
				mean, top1 := meanDiff(got.Logits, want)
				t.Logf("activations qdq=%v: |logit diff| max %.3g mean %.3g, same top-1 %.1f%%", act, d, mean, 100*top1)
				maxTol, meanTol := qdqMaxTol, qdqMeanTol
				if !act {
					maxTol, meanTol = 1e-3, 1e-4
				}
				if d > maxTol || mean > meanTol {
					t.Errorf("activations qdq=%v: logits differ by %.3g at most, %.3g on average: want %g, %g", act, d, mean, maxTol, meanTol)
				}

				opts := eval.Options{Ctx: ctx, BOS: 1}
				s.Reset()
				pw, err := eval.Perplexity(s, text, opts)
				if err != nil {
					t.Fatal(err)
				}
				pg := ortPerplexity(t, out, text, q.Model.Config.Vocab, opts)
				rel := math.Abs(pg.PPL/pw.PPL - 1)
				t.Logf("activations qdq=%v: perplexity ORT %.4f, simulation %.4f (%.3f%%) over %d tokens", act, pg.PPL, pw.PPL, 100*rel, pw.Tokens)
				if rel > 0.005 {
					t.Errorf("activations qdq=%v: perplexity %.4f against %.4f", act, pg.PPL, pw.PPL)
				}
				if act {
					pd := ortPerplexity(t, dev, text, q.Model.Config.Vocab, opts)
					rel := math.Abs(pd.PPL/pw.PPL - 1)
					t.Logf("with 16-bit linear outputs: perplexity ORT %.4f (%.3f%%)", pd.PPL, 100*rel)
					if rel > 0.005 {
						t.Errorf("with 16-bit linear outputs: perplexity %.4f against %.4f", pd.PPL, pw.PPL)
					}
					// other ranges than the simulation's: no worse than it
					pc := ortPerplexity(t, cal, text, q.Model.Config.Vocab, opts)
					t.Logf("calibrated on %d tokens of text: perplexity ORT %.4f (%+.3f%%)", ctx, pc.PPL, 100*(pc.PPL/pw.PPL-1))
					if pc.PPL > pw.PPL*1.005 {
						t.Errorf("calibrated on text: perplexity %.4f against %.4f", pc.PPL, pw.PPL)
					}
				}
			}
		})
	}
}

// TestFloatExportMatchesRun requires ONNX Runtime, running the float
// export of stories260K and wp-llama (one AR-32 prefill, then AR-1 steps),
// to reproduce the 64 ids `aotlm run --temp 0 -n 64` generates: the model
// compiled as run compiles it, decoded greedily through the public API.
func TestFloatExportMatchesRun(t *testing.T) {
	t.Setenv("AOTLM_CACHE", t.TempDir())
	for _, c := range []struct{ name, rel, prompt string }{
		{"stories260K", "models/stories260K/stories260K.gguf", "Once upon a time, there was a little girl named Lily."},
		{"wp-llama", "models/wp-llama", "Prince Andrew looked at Pierre and said"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ortDir(t)
			src := testutil.Path(t, c.rel)
			m, err := load.Open(src, load.Options{Threads: 1, Compile: load.CompileDefaults()})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			s, err := m.NewSession(256)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			res, err := s.Generate(context.Background(), aotlm.Request{Prompt: c.prompt, MaxTokens: 64, IgnoreEOS: true,
				Sampling: aotlm.Sampling{Temperature: 0}}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.IDs) != 64 || len(res.PromptIDs) > 32 {
				t.Fatalf("run gave %d ids after a %d-token prompt", len(res.IDs), len(res.PromptIDs))
			}
			fm := loadModel(t, c.rel)
			dir := t.TempDir()
			if err := Export(dir, fm, Options{ARLen: 32, Context: 256}); err != nil {
				t.Fatal(err)
			}
			got := runORT(t, dir, res.PromptIDs, 64)
			for i, id := range res.IDs {
				if got.IDs[i] != id {
					t.Fatalf("id %d: ONNX Runtime %v\nrun %v", i, got.IDs, res.IDs)
				}
			}
			t.Logf("%d prompt tokens, 64 ids equal", len(res.PromptIDs))
		})
	}
}

// TestFloatWeightsQDQActivations exports float stories260K with 16-bit
// linear inputs and a uint8 cache over the greedy calibration (as
// `export --activations qdq` does for a float model, its linear outputs
// aside) and requires ONNX Runtime's logits over 192 tokens to match the
// interpreter's simulation of the same within the QDQ tolerances.
func TestFloatWeightsQDQActivations(t *testing.T) {
	ortDir(t)
	const ctx = 256
	rel := "models/stories260K/stories260K.gguf"
	m := loadModel(t, rel)
	q := &QDQ{}
	if err := calibrateOn(q, m, nil, ctx); err != nil {
		t.Fatal(err)
	}
	q.Outputs = nil
	out := t.TempDir()
	if err := Export(out, m, Options{ARLen: 32, Context: ctx, Quant: q}); err != nil {
		t.Fatal(err)
	}
	s, err := qdq.NewSession(m, ctx, 1, &qdq.Sim{Static16: q.Activations, KV: q.KV})
	if err != nil {
		t.Fatal(err)
	}
	ids := textTokens(t, testutil.Path(t, rel), "text/TinyStories-valid-excerpt.txt", 0, 192)
	want, err := s.Logits(ids)
	if err != nil {
		t.Fatal(err)
	}
	got := runORT(t, out, ids, 0)
	d := maxDiff(t, got.Logits, want)
	mean, top1 := meanDiff(got.Logits, want)
	t.Logf("|logit diff| max %.3g mean %.3g, same top-1 %.1f%%", d, mean, 100*top1)
	if d > qdqMaxTol || mean > qdqMeanTol {
		t.Fatalf("logits differ by %.3g at most, %.3g on average: want %g, %g", d, mean, qdqMaxTol, qdqMeanTol)
	}
}
