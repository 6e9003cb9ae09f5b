package lora_test

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/lora"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

// q4Fixture writes the qwen3 fixture's GGUF with its layers' matrices in
// Q4_0 blocks (the rest float32) and returns its path.
func q4Fixture(t *testing.T) string {
	t.Helper()
	f, err := gguf.Open(testutil.ArchModelPaths(t, "qwen3")["gguf"])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []gguf.WriteTensor
	for _, ti := range f.Tensors() {
		v, err := f.ReadFloat32(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		dt := tensor.F32
		if strings.HasPrefix(ti.Name, "blk.") && len(ti.Shape) == 2 && ti.Shape[1]%32 == 0 {
			dt = tensor.Q4_0
		}
		ts = append(ts, gguf.WriteTensor{Name: ti.Name, DType: dt, Shape: ti.Shape, Values: v})
	}
	path := filepath.Join(t.TempDir(), "q4.gguf")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	bw := bufio.NewWriter(out)
	if err := gguf.Write(bw, f.KVs(), ts); err != nil {
		t.Fatal(err)
	}
	if err := bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestMergeKeepsQ4 merges the qwen3 adapter into a Q4_0 GGUF: the merged
// linears stay 4-bit in the artifact (requantized), and its logits are
// no further from those of the exact float32 merge of the same file
// (--gguf-weights f32) than twice what Q4_0 costs the base model.
func TestMergeKeepsQ4(t *testing.T) {
	o, _ := lora.ReadOracle(t, "qwen3")
	src := q4Fixture(t)
	specs := []lora.Spec{{Path: filepath.Join("testdata", "qwen3"), Scale: 1}}
	logits := map[string][]float32{}
	for _, mode := range []string{compile.GGUFNative, compile.GGUFFloat32} {
		out := filepath.Join(t.TempDir(), mode+".aot")
		if err := compile.CompileFile(src, out, compile.Options{ARLens: []int{16}, Ctx: 128, LoRA: specs, GGUFWeights: mode}); err != nil {
			t.Fatal(err)
		}
		if mode == compile.GGUFNative {
			a, err := artifact.Open(out, artifact.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, ti := range a.Tensors() {
				if strings.HasSuffix(ti.Name, "q_proj.weight") && !strings.Contains(ti.Layout, "q4") {
					t.Errorf("%s is stored as %v %q, not 4-bit", ti.Name, ti.DType, ti.Layout)
				}
			}
			a.Close()
		}
		e, err := engine.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		logits[mode] = allLogits(t, e, nil, 0, o.Tokens)
		e.Close()
	}
	// what Q4_0 alone costs: the fixture's float32 weights against their
	// Q4_0 blocks, without the adapter
	var q4Cost float64
	{
		base := map[string][]float32{}
		for name, path := range map[string]string{"f32": testutil.ArchModelPaths(t, "qwen3")["gguf"], "q4": src} {
			out := filepath.Join(t.TempDir(), name+".aot")
			if err := compile.CompileFile(path, out, compile.Options{ARLens: []int{16}, Ctx: 128}); err != nil {
				t.Fatal(err)
			}
			e, err := engine.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			base[name] = allLogits(t, e, nil, 0, o.Tokens)
			e.Close()
		}
		q4Cost = lora.MaxDiff(base["f32"], base["q4"])
	}
	d := lora.MaxDiff(logits[compile.GGUFNative], logits[compile.GGUFFloat32])
	t.Logf("Q4_0 base merged, requantized vs float32: max |logit diff| %.3g; Q4_0 blocks vs float32 without the adapter: %.3g", d, q4Cost)
	if d > 2*q4Cost {
		t.Errorf("the requantized merge differs from the float32 merge by %.3g, over twice what Q4_0 costs the base (%.3g)", d, q4Cost)
	}
}
