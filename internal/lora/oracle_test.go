package lora

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/testutil"
)

// The oracle in testdata/<family> (llama and qwen3, the arch fixtures of
// the shared test data) was made this way:
//
//  1. go run ./internal/lora/loragen -model <testdata>/arch/<family> -o
//     internal/lora/testdata/<family> -seed N (1 for llama, 2 for qwen3)
//     wrote the PEFT folder (rank 4, alpha 8, q/k/v/o and the MLP of
//     every layer) and adapter.gguf, the same adapter written by aotlm's
//     GGUF writer in llama.cpp's adapter format (llama.cpp's
//     convert_lora_to_gguf.py did not write it).
//  2. A C++ program linked against llama.cpp's libllama (ggml 0.18.1; the
//     build does not record its commit) loaded arch/<family>/model.gguf
//     (n_ctx 256, one thread, F32 KV cache, flash attention off: without
//     the adapter it reproduces the fixture's reference.json logits
//     exactly), called llama_adapter_lora_init on adapter.gguf and
//     llama_set_adapters_lora with the scale, decoded the fixture's
//     reference tokens in one batch with logits for every position, and
//     wrote llama_get_logits_ith of each position as little-endian
//     float32: logits-scale1.f32 and logits-scale0.5.f32.
//
// reference.json lists the tokens, the vocabulary size and the files.

// oracle is one family's llama.cpp reference.
type oracle struct {
	Family string            `json:"family"`
	Tokens []int             `json:"tokens"`
	Vocab  int               `json:"vocab"`
	Scales map[string]string `json:"scales"`
}

// oracleTol is the largest |logit difference| from llama.cpp allowed.
const oracleTol = 1e-3

func readOracle(t *testing.T, family string) (oracle, map[float64][]float32) {
	t.Helper()
	dir := filepath.Join("testdata", family)
	raw, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var o oracle
	if err := json.Unmarshal(raw, &o); err != nil {
		t.Fatal(err)
	}
	logits := map[float64][]float32{}
	for s, file := range o.Scales {
		var scale float64
		if err := json.Unmarshal([]byte(s), &scale); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != 4*o.Vocab*len(o.Tokens) {
			t.Fatalf("%s holds %d bytes, want %d", file, len(b), 4*o.Vocab*len(o.Tokens))
		}
		v := make([]float32, len(b)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		logits[scale] = v
	}
	if len(logits) != 2 {
		t.Fatalf("%s: %d scales, want 2", family, len(logits))
	}
	return o, logits
}

// interpLogits runs the tokens through the interpreter of the model at
// path with the adapters of specs merged as it is read, returning every
// position's logits.
func interpLogits(t *testing.T, path string, specs []Spec, tokens []int) []float32 {
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
	if err := Attach(src, specs); err != nil {
		t.Fatal(err)
	}
	w := graph.Weights{}
	for _, n := range src.Names() {
		if w[n], err = src.Read(n); err != nil {
			t.Fatal(err)
		}
	}
	g, err := arch.Build(&src.Config, arch.BuildOptions{AllLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	in, err := graph.NewInterpreter(g, w, 2)
	if err != nil {
		t.Fatal(err)
	}
	out, rows, err := in.Run(in.NewState(len(tokens)), tokens)
	if err != nil {
		t.Fatal(err)
	}
	if rows != len(tokens) {
		t.Fatalf("%d rows of logits, want %d", rows, len(tokens))
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

// TestMergeMatchesLlamaCpp merges each fixture's adapter, from the PEFT
// folder and from the GGUF adapter, into its Hugging Face and its GGUF
// weights (so each adapter also meets the other layout: llama's q/k rows
// are permuted in GGUF) and checks the logits at both scales against
// llama.cpp's. The merge must also move the logits: the base model's
// differ from the oracle by far more than the tolerance.
func TestMergeMatchesLlamaCpp(t *testing.T) {
	for _, family := range []string{"llama", "qwen3"} {
		o, want := readOracle(t, family)
		paths := testutil.ArchModelPaths(t, family)
		base := interpLogits(t, paths["gguf"], nil, o.Tokens)
		if d := maxDiff(base, want[1]); d < 0.1 {
			t.Errorf("%s: the base model is within %.3g of the adapted logits: the oracle does not test the adapter", family, d)
		}
		for _, src := range []string{"hf", "gguf"} {
			for _, ad := range []string{"", "adapter.gguf"} {
				for scale, ref := range want {
					sp := Spec{Path: filepath.Join("testdata", family, ad), Scale: scale}
					d := maxDiff(interpLogits(t, paths[src], []Spec{sp}, o.Tokens), ref)
					t.Logf("%s %s base, adapter %q at %g: max |logit diff| %.3g", family, src, ad, scale, d)
					if d > oracleTol {
						t.Errorf("%s %s base, adapter %q at %g: logits differ from llama.cpp's by %.3g", family, src, ad, scale, d)
					}
				}
			}
		}
	}
}

// TestAdapterForAnotherModel: an adapter whose matrices do not fit the
// model is refused, naming the problem.
func TestAdapterForAnotherModel(t *testing.T) {
	ck, err := detect.Open(testutil.ArchModelPaths(t, "qwen3")["hf"])
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	src, err := arch.Open(ck)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"testdata/llama", "testdata/llama/adapter.gguf"} {
		err := Attach(src, []Spec{{Path: path, Scale: 1}})
		if err == nil || !strings.Contains(err.Error(), "another base model") {
			t.Errorf("%s on qwen3: got %v, want an error naming another base model", path, err)
		}
	}
}
