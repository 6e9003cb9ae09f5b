package qmodel

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/format/safetensors"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

// streamModel is a tall, narrow model: 24 layers of 1 MB of float32 each,
// its largest tensors (embedding, classifier) 512 KB.
var streamModel = tinymodel.Config{HiddenSize: 128, IntermediateSize: 512, NumLayers: 24, NumHeads: 4,
	NumKVHeads: 2, VocabSize: 1024, MaxPositions: 128, DType: tensor.F16}

func recipe(t *testing.T, name string) quant.Recipe {
	t.Helper()
	r, err := quant.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// inMemory quantizes the model at src the way Quantize did before it
// streamed: every tensor loaded, quantized, then all parts written by
// safetensors.Write.
func inMemory(t *testing.T, src, out string, opts Options) {
	t.Helper()
	ck, err := detect.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := arch.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	g, err := arch.Build(&m.Config, arch.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	linear, embeds := roles(g)
	var parts []safetensors.Tensor
	for name, w := range m.Weights {
		p := planTensor(name, g.Weights[name], linear[name], embeds[name], m.Config.Tied, opts)
		_, _, ps, err := quantizeOne(&p, w, &Prepared{})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, ps...)
	}
	if err := safetensors.Write(out, parts, map[string]string{"format": "aotlm-quant"}); err != nil {
		t.Fatal(err)
	}
}

// TestQuantizeStreamsSameBytes: the streamed weights file, with 1 or 3
// jobs, is byte for byte the in-memory one, for several recipes and an
// indivisible width (padded or W8 fallback).
func TestQuantizeStreamsSameBytes(t *testing.T) {
	dir := t.TempDir()
	hf := filepath.Join(dir, "hf")
	cfg := streamModel
	cfg.NumLayers, cfg.IntermediateSize = 2, 176 // 176 is not a multiple of 32
	if err := tinymodel.WriteLlama(hf, cfg, 1); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		recipe     string
		fallbackW8 bool
	}{{"w4a16-lpbq", false}, {"w4a16-lpbq", true}, {"q4", false}, {"w8a16", false}} {
		opts := Options{Recipe: recipe(t, c.recipe), FallbackW8: c.fallbackW8}
		want := filepath.Join(dir, "mem.safetensors")
		inMemory(t, hf, want, opts)
		wb, err := os.ReadFile(want)
		if err != nil {
			t.Fatal(err)
		}
		for _, jobs := range []int{1, 3} {
			out := filepath.Join(dir, "q")
			opts.Jobs, opts.Force = jobs, true
			if _, err := Quantize(hf, out, opts); err != nil {
				t.Fatal(err)
			}
			gb, err := os.ReadFile(filepath.Join(out, WeightsName))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(gb, wb) {
				t.Fatalf("%s (fallback %v), %d jobs: streamed weights differ from the in-memory ones", c.recipe, c.fallbackW8, jobs)
			}
		}
	}
}

// liveHeap returns the bytes of live heap objects (after a collection).
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestQuantizeBoundedMemory guards the streaming: quantizing a model of 26
// MB of float32 whose largest tensor is 512 KB, the live heap sampled after
// every tensor (after a collection, so without timing or garbage) grows by
// less than 16 largest tensors. The same sampling while the loaded model
// is held exceeds the bound, so the check can fail.
func TestQuantizeBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and quantizes a 13 MB model")
	}
	dir := t.TempDir()
	hf := filepath.Join(dir, "hf")
	if err := tinymodel.WriteLlama(hf, streamModel, 2); err != nil {
		t.Fatal(err)
	}
	const largest = 1024 * 128 * 4
	const bound = 16 * largest
	measure := func(every int, hold bool) (uint64, int) {
		base := liveHeap()
		var m *arch.Model
		if hold {
			ck, err := detect.Open(hf)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			if m, err = arch.Load(ck); err != nil {
				t.Fatal(err)
			}
		}
		var peak uint64
		n := 0
		afterTensor = func(string) {
			if n++; n%every == 0 {
				peak = max(peak, liveHeap())
			}
		}
		defer func() { afterTensor = nil }()
		if _, err := Quantize(hf, filepath.Join(dir, "q"), Options{Recipe: recipe(t, "w4a16-lpbq"), Jobs: 1, Force: true}); err != nil {
			t.Fatal(err)
		}
		runtime.KeepAlive(m)
		return peak - min(peak, base), n
	}
	grew, n := measure(1, false)
	t.Logf("streaming: live heap grew by at most %d KB over %d tensors (bound %d KB)", grew>>10, n, bound>>10)
	if n < 200 {
		t.Fatalf("the hook saw %d tensors", n)
	}
	if grew > bound {
		t.Errorf("streaming quantize: live heap grew by %d bytes, more than %d (16 largest tensors)", grew, bound)
	}
	held, _ := measure(40, true)
	t.Logf("model held: live heap grew by %d KB", held>>10)
	if held <= bound {
		t.Errorf("holding the model grew the live heap by only %d bytes: the bound %d cannot catch it", held, bound)
	}
}
