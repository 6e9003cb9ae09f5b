package engine_test

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestLongRopeParity gives the phi3 fixture's config.json a longrope block
// (factors in [1, 4), original context 32 of 256, so cos and sin grow by
// sqrt(1+ln8/ln32)), compiles it with the rope built for 32 positions
// (short factors) and for 64 (long), and checks the engine against the
// interpreter within logitTol (1e-5), AR-1 and AR-4 hybrid; the scaling
// must move the logits. Without a set rope context, the compiler must
// choose by its own context (64, long factors).
func TestLongRopeParity(t *testing.T) {
	var cfg map[string]any
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/phi3/config.json"), &cfg); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 19))
	var short, long []any
	for range 9 { // rotary size 18
		short, long = append(short, 1+3*r.Float64()), append(long, 1+3*r.Float64())
	}
	cfg["original_max_position_embeddings"] = 32
	cfg["rope_scaling"] = map[string]any{"type": "longrope", "short_factor": short, "long_factor": long}
	dir := t.TempDir()
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testutil.Path(t, "arch/phi3/model.safetensors"), filepath.Join(dir, "model.safetensors")); err != nil {
		t.Fatal(err)
	}
	m := loadModel(t, dir)
	plain := loadModel(t, testutil.Path(t, "arch/phi3"))
	ids := []int{5, 77, 13, 200, 9, 41}
	var logits [][]float32
	for _, ctx := range []int{32, 64} {
		m.Config.RopeContext = ctx
		e := compileModel(t, m, 64, 4)
		for _, n := range []int{1, 4} {
			checkParity(t, m, e, n, engine.ModeHybrid)
		}
		in := interpreter(t, m)
		out, _, err := in.Run(in.NewState(64), ids)
		if err != nil {
			t.Fatal(err)
		}
		logits = append(logits, out)
	}
	// unset, the compiler builds the rope for its own context (64: long)
	m.Config.RopeContext = 0
	e := compileModel(t, m, 64, 4)
	m.Config.RopeContext = 64
	checkParity(t, m, e, 4, engine.ModeHybrid)
	in := interpreter(t, plain)
	base, _, err := in.Run(in.NewState(64), ids)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(logits[0], base); d < 1e-3 {
		t.Errorf("longrope (short) logits differ from unscaled by only %.3g", d)
	}
	if d := maxDiff(logits[0], logits[1]); d < 1e-3 {
		t.Errorf("short and long factor logits differ by only %.3g", d)
	}
}
