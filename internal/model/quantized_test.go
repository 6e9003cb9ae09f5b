package model_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/model"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestStoriesQuantizedGGUF rewrites stories260K.gguf with its matrices in
// Q8_0 and Q4_0 (rows whose width is not a multiple of 32, the 172-wide
// down projections, stay F32 as llama.cpp would have to keep them) and runs
// the files through the normal loader. Error against llama2.c's f32 logits,
// as max |diff| over max |logit| (measured: Q8_0 0.011 with the argmax equal
// at 9/9 positions, Q4_0 0.23 — 4-bit blocks of 32 on a 260K-parameter model
// are coarse): budgets are Q8_0 0.02 with every argmax equal, Q4_0 0.35.
func TestStoriesQuantizedGGUF(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	var ref logitsRef
	if err := json.Unmarshal(testutil.ReadFile(t, "reference/stories260K-logits.json"), &ref); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		dt     tensor.DType
		budget float64
		argmax bool
	}{{tensor.Q8_0, 0.02, true}, {tensor.Q4_0, 0.35, false}} {
		var ts []gguf.WriteTensor
		quantized := 0
		for _, info := range f.Tensors() {
			v, err := f.ReadFloat32(info.Name)
			if err != nil {
				t.Fatal(err)
			}
			w := gguf.WriteTensor{Name: info.Name, DType: tensor.F32, Shape: info.Shape, Values: v}
			if len(info.Shape) == 2 && info.Shape[1]%32 == 0 {
				w.DType, w.Values = c.dt, nil
				if c.dt == tensor.Q8_0 {
					w.Data = gguf.QuantizeQ8_0(v)
				} else {
					w.Data = gguf.QuantizeQ4_0(v)
				}
				quantized++
			}
			ts = append(ts, w)
		}
		path := filepath.Join(t.TempDir(), "stories-"+c.dt.String()+".gguf")
		out, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := gguf.Write(out, f.KVs(), ts); err != nil {
			t.Fatal(err)
		}
		out.Close()
		m, err := model.Open(path, model.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s, _ := m.NewSession(0)
		got, err := s.Logits(ref.PromptIDs)
		if err != nil {
			t.Fatal(err)
		}
		var maxDiff, maxAbs float64
		same := 0
		for i := range got {
			for j, want := range ref.Logits[i] {
				maxDiff = math.Max(maxDiff, math.Abs(float64(got[i][j]-want)))
				maxAbs = math.Max(maxAbs, math.Abs(float64(want)))
			}
			if argmax32(got[i]) == argmax32(ref.Logits[i]) {
				same++
			}
		}
		t.Logf("%v: %d tensors quantized, max |diff| %.3g (%.2g of max |logit|), argmax equal at %d/%d positions",
			c.dt, quantized, maxDiff, maxDiff/maxAbs, same, len(got))
		if quantized < 30 || maxDiff/maxAbs > c.budget || (c.argmax && same != len(got)) {
			t.Errorf("%v outside its budget", c.dt)
		}
	}
}

func argmax32(v []float32) int {
	b := 0
	for i := range v {
		if v[i] > v[b] {
			b = i
		}
	}
	return b
}
