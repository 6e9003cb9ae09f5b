package imatrix

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/tensor"
)

// entry is one weight of a test importance matrix.
type entry struct {
	name   string
	sums   []float32
	nmat   int
	counts []float32
}

// writeIM writes an importance matrix in llama-imatrix's GGUF layout.
func writeIM(t *testing.T, typ string, es ...entry) string {
	t.Helper()
	var ts []gguf.WriteTensor
	for _, e := range es {
		ts = append(ts, gguf.WriteTensor{Name: e.name + ".in_sum2", DType: tensor.F32, Shape: []int64{int64(e.nmat), int64(len(e.sums) / e.nmat)}, Values: e.sums})
		if e.counts != nil {
			ts = append(ts, gguf.WriteTensor{Name: e.name + ".counts", DType: tensor.F32, Shape: []int64{int64(e.nmat), 1}, Values: e.counts})
		}
	}
	path := filepath.Join(t.TempDir(), "imatrix.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	kv := []gguf.KV{{Key: "general.type", Value: typ}, {Key: "imatrix.chunk_count", Value: uint32(4)}}
	if err := gguf.Write(f, kv, ts); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRead(t *testing.T) {
	p := writeIM(t, "imatrix",
		entry{name: "blk.0.attn_q.weight", sums: []float32{8, 0, 2, 4}, nmat: 1, counts: []float32{4}},
		entry{name: "blk.0.ffn_down.weight", sums: []float32{1, 3}, nmat: 1, counts: []float32{2}})
	im, err := Read(p)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]float64{"blk.0.attn_q.weight": {2, 0, 0.5, 1}, "blk.0.ffn_down.weight": {0.5, 1.5}}
	for name, w := range want {
		got := im[name]
		if len(got) != len(w) {
			t.Fatalf("%s: %v, want %v", name, got, w)
		}
		for i := range w {
			if got[i] != w[i] {
				t.Errorf("%s[%d] = %v, want %v (sum / count)", name, i, got[i], w[i])
			}
		}
	}
	cols := map[string]int{"model.layers.0.self_attn.q_proj.weight": 4, "model.layers.0.mlp.up_proj.weight": 2, "blk.0.ffn_down.weight": 2}
	fw, err := ForWeights(im, cols)
	if err != nil {
		t.Fatal(err)
	}
	if len(fw) != 2 || fw["model.layers.0.self_attn.q_proj.weight"][0] != 2 || fw["blk.0.ffn_down.weight"][1] != 1.5 {
		t.Errorf("ForWeights = %v: want q_proj under its canonical name and ffn_down under its own, up_proj left out", fw)
	}
	if _, err := ForWeights(im, map[string]int{"model.layers.0.self_attn.q_proj.weight": 8}); err == nil || !strings.Contains(err.Error(), "4 channels") {
		t.Errorf("width mismatch: %v", err)
	}
	if _, err := ForWeights(im, map[string]int{"model.layers.1.self_attn.q_proj.weight": 4}); err == nil {
		t.Error("no matching entry: no error")
	}
}

func TestReadRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, typ, want string
		e               entry
	}{
		{"no counts", "imatrix", "no counts", entry{name: "a.weight", sums: []float32{1}, nmat: 1}},
		{"zero count", "imatrix", "one positive count", entry{name: "a.weight", sums: []float32{1}, nmat: 1, counts: []float32{0}}},
		{"negative sum", "imatrix", "finite sum of squares", entry{name: "a.weight", sums: []float32{-1}, nmat: 1, counts: []float32{1}}},
		{"experts", "imatrix", "2 expert matrices", entry{name: "a.weight", sums: []float32{1, 2}, nmat: 2, counts: []float32{1, 1}}},
		{"other type", "model", "not an importance matrix", entry{name: "a.weight", sums: []float32{1}, nmat: 1, counts: []float32{1}}},
	} {
		_, err := Read(writeIM(t, tc.typ, tc.e))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := Read(writeIM(t, "imatrix")); err == nil || !strings.Contains(err.Error(), "no .in_sum2") {
		t.Errorf("empty: %v", err)
	}
}
