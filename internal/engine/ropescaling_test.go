package engine_test

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

// ropeScalingRef is a reference of testdata/ropescaling: llama.cpp's
// logits at some rows of a fixture family's tokens, with a rope scaling
// its config.json did not have.
type ropeScalingRef struct {
	Family      string         `json:"family"`
	RopeScaling map[string]any `json:"rope_scaling"` // as config.json gives it
	// Config holds more config.json keys to set (the trained and original
	// contexts of a longrope reference).
	Config map[string]any `json:"config"`
	// Context, when set, is llama.cpp's context size, which picks
	// longrope's factor set: the artifact is then compiled for 64
	// positions and opened for Context.
	Context int `json:"context"`
	// GGUF holds the metadata llama.cpp ran with (keys of the fixture's
	// model.gguf replaced, others added), GGUFTensors the tensors added.
	GGUF        map[string]any       `json:"gguf"`
	GGUFTensors map[string][]float32 `json:"gguf_tensors"`
	Tokens      []int                `json:"tokens"`
	Rows        []int                `json:"rows"`
	Logits      [][]float32          `json:"logits"`
}

// TestRopeScalingMatchesLlamaCpp gives the config.json of each fixture
// family in testdata/ropescaling (arch/<family>), and its model.gguf
// (the metadata llama.cpp ran with), a rope_scaling block,
// YaRN (factor 4 over an original context of 32 positions, beta 32 and 1,
// HF's attention factor) or linear (factor 2), in place of its own if it
// has one (gemma3's global layers; its local layers stay unscaled),
// compiles it and checks the
// logits of the reference's rows, in hybrid passes of 8, against
// llama.cpp's within ropeScalingTol (this llama.cpp build differs from
// the fixtures' own unscaled references by up to 1.3e-2 on smollm3,
// 8.2e-3 on gemma3, whose GELU llama.cpp takes from a binary16 table,
// 2.2e-3 on the others, 3e-5 on granite); the scaling must move
// llama.cpp's logits away from the unscaled reference by more than five
// times that.
//
// The references come from llama.cpp (upstream build of this machine) run
// on each fixture's model.gguf with the scaling given as metadata
// overrides, the way a converted checkpoint carries it: a small C program
// against libllama (llama_model_params.kv_overrides; one batch of every
// token, n_ctx 256, F32 cache, flash attention off, 2 threads) with
// overrides <arch>.rope.scaling.type=yarn, <arch>.rope.scaling.factor=4,
// <arch>.rope.scaling.original_context_length=32 (or type linear,
// factor 2), <arch> being the GGUF architecture (chatglm for glm); the
// rows kept are n/3, 2n/3 and n-1 of the n tokens.
//
// The phi3-longrope references check longrope across an extended
// context: the fixture's GGUF rewritten with rope_factors_short.weight and
// rope_factors_long.weight tensors (the factors of the reference's
// rope_scaling, as float32) and phi3.rope.scaling.attn_factor
// sqrt(1+ln2/ln256) (its original context staying 256), run by the same
// program with n_ctx 256 (short factors) and 512 (long ones, beyond the
// original context); here config.json says 512 positions of an original
// 256 (the GGUF phi3.context_length 512, which leaves llama.cpp's logits
// unchanged), and an artifact compiled for 64 positions opens for 256 or
// 512.
func TestRopeScalingMatchesLlamaCpp(t *testing.T) {
	files, err := filepath.Glob("testdata/ropescaling/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no references: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".json")
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var ref ropeScalingRef
			if err := json.Unmarshal(b, &ref); err != nil {
				t.Fatal(err)
			}
			if len(ref.Rows) != len(ref.Logits) || len(ref.Rows) == 0 {
				t.Fatalf("%d rows of %d logits", len(ref.Rows), len(ref.Logits))
			}
			plain := testutil.ReadArchReference(t, ref.Family)
			tol, moved := ropeScalingTol(ref.Family), 0.0
			for i, r := range ref.Rows {
				moved = max(moved, maxDiff(ref.Logits[i], plain.Logits[r]))
			}
			if moved < 5*tol {
				t.Errorf("the scaling moves llama.cpp's logits by %.3g only: a tolerance of %.3g cannot tell", moved, tol)
			}
			for src, path := range map[string]string{"hf": scaledFolder(t, ref), "gguf": scaledGGUF(t, ref)} {
				m := loadModel(t, path)
				e := compileModel(t, m, 128, 8)
				if ref.Context > 0 {
					if e, err = engine.OpenWith(compileAt(t, m, 64), engine.Options{Threads: 2, Context: ref.Context}); err != nil {
						t.Fatal(err)
					}
					defer e.Close()
				}
				s := newSession(t, e, engine.SessionOptions{Mode: engine.ModeHybrid, ARLen: 8, Threads: 2})
				rows, err := prefillAllAR(s, ref.Tokens, 8)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range ref.Rows {
					d := maxDiff(rows[r], ref.Logits[i])
					t.Logf("%s: row %d: max |logit diff| %.3g", src, r, d)
					if d > tol {
						t.Errorf("%s: row %d: logits differ from llama.cpp's by %.3g", src, r, d)
					}
				}
			}
		})
	}
}

// scaledFolder writes the fixture's Hugging Face folder with the
// reference's rope_scaling and config keys in config.json.
func scaledFolder(t *testing.T, ref ropeScalingRef) string {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/"+ref.Family+"/config.json"), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["rope_scaling"] = ref.RopeScaling
	for k, v := range ref.Config {
		cfg[k] = v
	}
	dir := t.TempDir()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testutil.Path(t, "arch/"+ref.Family+"/model.safetensors"), filepath.Join(dir, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// scaledGGUF writes the fixture's GGUF with the reference's metadata
// (strings as given, integers of a "length" key as uint32, other numbers
// as float32, as llama.cpp's converter types them) and float32 tensors.
func scaledGGUF(t *testing.T, ref ropeScalingRef) string {
	t.Helper()
	f, err := gguf.Open(testutil.Path(t, "arch/"+ref.Family+"/model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	value := func(k string, v any) any {
		if x, ok := v.(float64); ok {
			if strings.HasSuffix(k, "length") {
				return uint32(x)
			}
			return float32(x)
		}
		return v
	}
	var kv []gguf.KV
	for _, e := range f.KVs() {
		if v, ok := ref.GGUF[e.Key]; ok {
			e.Value = value(e.Key, v)
		}
		kv = append(kv, e)
	}
	for _, k := range slices.Sorted(maps.Keys(ref.GGUF)) {
		if !slices.ContainsFunc(kv, func(e gguf.KV) bool { return e.Key == k }) {
			kv = append(kv, gguf.KV{Key: k, Value: value(k, ref.GGUF[k])})
		}
	}
	var ts []gguf.WriteTensor
	for _, ti := range f.Tensors() {
		data, err := f.TensorData(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, gguf.WriteTensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: data})
	}
	for _, name := range slices.Sorted(maps.Keys(ref.GGUFTensors)) {
		v := ref.GGUFTensors[name]
		ts = append(ts, gguf.WriteTensor{Name: name, DType: tensor.F32, Shape: []int64{int64(len(v))}, Values: v})
	}
	path := filepath.Join(t.TempDir(), "model.gguf")
	if err := gguf.WriteFile(path, kv, ts); err != nil {
		t.Fatal(err)
	}
	return path
}

// ropeScalingTol is the tolerance of a family's scaled logits against
// llama.cpp's: a little above this llama.cpp build's distance to the
// fixture's own reference.
func ropeScalingTol(family string) float64 {
	switch family {
	case "smollm3":
		return 2e-2
	case "granite":
		return 1e-4
	case "gemma3":
		return 2e-2
	}
	return 3e-3
}
