package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/model"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

// runCLI runs the command line in-process and returns exit code and outputs.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

type runJSON struct {
	PromptIDs []int  `json:"prompt_ids"`
	IDs       []int  `json:"ids"`
	Text      string `json:"text"`
}

// tinyConfig is a random model with stories260K's 512-token vocabulary, so
// the real tok512 tokenizer can drive it from text.
func tinyConfig() tinymodel.Config {
	return tinymodel.Config{HiddenSize: 32, IntermediateSize: 48, NumLayers: 2, NumHeads: 4,
		NumKVHeads: 2, VocabSize: 512, MaxPositions: 64}
}

// TestRunTinyModelAgainstReference writes random tiny Llama models (HF
// safetensors in f32, sharded bf16, and a llama2.c file whose q/k rows are
// in the interleaved order), runs `aotlm run --temp 0 --json` on each, and
// checks the greedy ids and the per-position logits against refLlama, an
// independent float64 forward, with the rotary pairing of each format.
func TestRunTinyModelAgainstReference(t *testing.T) {
	tokModel := testutil.Path(t, "llama2c/tok512-dratman/tok512.model")
	tokBin := testutil.Path(t, "llama2c/tok512-dratman/tok512.bin")
	const seed = 11
	dir := t.TempDir()
	type variant struct {
		name        string
		cfg         tinymodel.Config
		path, tok   string
		interleaved bool
	}
	bf := tinyConfig()
	bf.DType, bf.Shards = tensor.BF16, 3
	vs := []variant{
		{"hf-f32", tinyConfig(), filepath.Join(dir, "hf"), tokModel, false},
		{"hf-bf16-sharded", bf, filepath.Join(dir, "hfbf"), tokModel, false},
		{"llama2c", tinyConfig(), filepath.Join(dir, "tiny.bin"), tokBin, true},
	}
	for _, v := range vs {
		t.Run(v.name, func(t *testing.T) {
			var err error
			if v.interleaved {
				err = tinymodel.WriteLlama2C(v.path, v.cfg, seed, 0)
			} else {
				err = tinymodel.WriteLlama(v.path, v.cfg, seed)
			}
			if err != nil {
				t.Fatal(err)
			}
			w, err := tinymodel.Llama(v.cfg, seed)
			if err != nil {
				t.Fatal(err)
			}
			if v.interleaved {
				E := v.cfg.HiddenSize / v.cfg.NumHeads
				for l := 0; l < v.cfg.NumLayers; l++ {
					p := "model.layers." + itoa(l) + ".self_attn."
					q, k := w[p+"q_proj.weight"], w[p+"k_proj.weight"]
					q.Data = tinymodel.Interleave(q.Data, v.cfg.NumHeads, E, v.cfg.HiddenSize)
					k.Data = tinymodel.Interleave(k.Data, v.cfg.NumKVHeads, E, v.cfg.HiddenSize)
					w[p+"q_proj.weight"], w[p+"k_proj.weight"] = q, k
				}
			}
			const n = 12
			code, stdout, stderr := runCLI(t, "run", "-m", v.path, "--tokenizer", v.tok,
				"-p", "Once upon a time", "-n", "12", "--temp", "0", "--json", "--ignore-eos", "-t", "2")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			var rep runJSON
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("output is not one JSON object: %v\n%s", err, stdout)
			}
			if len(rep.PromptIDs) < 2 || rep.PromptIDs[0] != 1 || len(rep.IDs) != n {
				t.Fatalf("prompt ids %v, %d ids", rep.PromptIDs, len(rep.IDs))
			}
			// greedy reference, one full forward per step
			seq := append([]int(nil), rep.PromptIDs...)
			for i := 0; i < n; i++ {
				logits := refLlama(v.cfg, w, seq, v.interleaved)
				last := logits[len(logits)-1]
				next := argmax(last)
				if next != rep.IDs[i] {
					t.Fatalf("greedy id %d: aotlm %d, reference %d (logits %v vs %v)", i, rep.IDs[i], next, last[rep.IDs[i]], last[next])
				}
				seq = append(seq, next)
			}
			// per-position logits through the library, all positions at once
			m, err := model.Open(v.path, model.Options{Tokenizer: v.tok})
			if err != nil {
				t.Fatal(err)
			}
			s, err := m.NewSession(0)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.Logits(seq)
			if err != nil {
				t.Fatal(err)
			}
			want := refLlama(v.cfg, w, seq, v.interleaved)
			var maxDiff float64
			for i := range want {
				for j := range want[i] {
					maxDiff = math.Max(maxDiff, math.Abs(float64(got[i][j])-want[i][j]))
				}
			}
			t.Logf("max |logit diff| over %d positions: %.2g", len(seq), maxDiff)
			if maxDiff > 1e-4 {
				t.Fatalf("logits differ from the reference by %g (tolerance 1e-4)", maxDiff)
			}
		})
	}
}

func TestRunStoriesText(t *testing.T) {
	m := testutil.Path(t, "models/stories260K/stories260K.gguf")
	code, stdout, stderr := runCLI(t, "run", "-m", m, "-p", "", "-n", "40", "--temp", "0")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	const want = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park."
	if !strings.HasPrefix(stdout, want) {
		t.Fatalf("output %q does not start with %q", stdout, want)
	}
	if !strings.Contains(stderr, "tok/s") {
		t.Errorf("no speed summary on stderr: %q", stderr)
	}
	// a prompt is echoed, and the continuation is decoded in its context:
	// llama2.c's greedy continuation of "Lily wanted to" starts " go" (id 298)
	code, stdout, stderr = runCLI(t, "run", "-m", m, "-p", "Lily wanted to", "-n", "3", "--temp", "0")
	if code != 0 || !strings.HasPrefix(stdout, "Lily wanted to go ") {
		t.Fatalf("exit %d (%s): %q", code, stderr, stdout)
	}
}

// TestRunBadInput checks that each kind of bad input prints one error line
// naming the problem and exits 1 (never 2, an internal fault).
func TestRunBadInput(t *testing.T) {
	dir := t.TempDir()
	stories := testutil.Path(t, "models/stories260K/stories260K.gguf")
	data, err := os.ReadFile(stories)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	truncated := write("truncated.gguf", data[:len(data)/2])
	magic := write("magic.gguf", append([]byte("GGUX"), data[4:]...))
	// an HF model whose tensor dtype is unknown
	hf := filepath.Join(dir, "hf")
	if err := tinymodel.WriteLlama(hf, tinyConfig(), 1); err != nil {
		t.Fatal(err)
	}
	st, _ := os.ReadFile(filepath.Join(hf, "model.safetensors"))
	write("hf/model.safetensors", bytes.Replace(st, []byte(`"F32"`), []byte(`"Q7X"`), 1))
	long := strings.Repeat("Once upon a time there was a dog. ", 400)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing file", []string{"run", "-m", filepath.Join(dir, "nope.gguf"), "-p", "x"}, "no such file"},
		{"wrong magic", []string{"run", "-m", magic, "-p", "x"}, "magic"},
		{"truncated", []string{"run", "-m", truncated, "-p", "x"}, "truncated.gguf"},
		{"unknown dtype", []string{"run", "-m", hf, "--tokenizer", testutil.Path(t, "llama2c/tok512-dratman/tok512.model"), "-p", "x"}, "Q7X"},
		{"prompt too long", []string{"run", "-m", stories, "-c", "256", "-p", long}, "longer than the context"},
		// llama2c/ holds the 32000-token tokenizer.bin beside the 512-token model
		{"no matching tokenizer", []string{"run", "-m", testutil.Path(t, "llama2c/stories260K.bin"), "-p", "x"}, "no tokenizer"},
		{"wrong tokenizer", []string{"run", "-m", testutil.Path(t, "llama2c/stories260K.bin"),
			"--tokenizer", testutil.Path(t, "llama2c/tokenizer.bin"), "-p", "x"}, "32000 tokens"},
		{"bad temperature", []string{"run", "-m", stories, "--temp", "-1", "-p", "x"}, "temperature"},
	}
	for _, c := range cases {
		code, stdout, stderr := runCLI(t, c.args...)
		if code != 1 {
			t.Errorf("%s: exit %d, want 1 (stderr %q)", c.name, code, stderr)
			continue
		}
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if len(lines) != 1 || !strings.HasPrefix(lines[0], "aotlm: ") || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: stderr %q, want one line mentioning %q", c.name, stderr, c.want)
		}
		if stdout != "" {
			t.Errorf("%s: wrote %q to stdout", c.name, stdout)
		}
	}
}

func TestHelpAndVersion(t *testing.T) {
	for _, cmd := range []string{"run", "tokenize", "version"} {
		code, stdout, _ := runCLI(t, cmd, "--help")
		if code != 0 || !strings.Contains(stdout, "Usage:") {
			t.Errorf("%s --help: exit %d, %q", cmd, code, stdout)
		}
	}
	code, stdout, _ := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "aotlm ") {
		t.Errorf("version: %d %q", code, stdout)
	}
}
