package compile

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/tensor"
	"github.com/aotlm/aotlm/internal/testutil"
	"github.com/aotlm/aotlm/internal/testutil/tinymodel"
)

// streamModel is a tall, narrow model: 24 layers of 1 MB of float32 each,
// its largest tensors (embedding, classifier) 512 KB.
var streamModel = tinymodel.Config{HiddenSize: 128, IntermediateSize: 512, NumLayers: 24, NumHeads: 4,
	NumKVHeads: 2, VocabSize: 1024, MaxPositions: 128, DType: tensor.F16}

// readFile returns the bytes at path.
func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestStreamingMatchesInMemory: the streaming path (a checkpoint or a
// quantized folder read tensor by tensor, any number of jobs) writes the
// bytes of the in-memory one (the whole model loaded, then compiled).
func TestStreamingMatchesInMemory(t *testing.T) {
	dir := t.TempDir()
	hf := filepath.Join(dir, "hf")
	cfg := streamModel
	cfg.NumLayers = 3
	if err := tinymodel.WriteLlama(hf, cfg, 1); err != nil {
		t.Fatal(err)
	}
	gguf := testutil.Path(t, "models/stories260K/stories260K.gguf")
	r, err := quant.Preset("w4a16-lpbq")
	if err != nil {
		t.Fatal(err)
	}
	qdir := filepath.Join(dir, "q")
	if _, err := qmodel.Quantize(gguf, qdir, qmodel.Options{Recipe: r}); err != nil {
		t.Fatal(err)
	}
	opts := Options{ARLens: []int{4}, Ctx: 64}
	for _, ckpt := range []string{hf, gguf} {
		ck, err := detect.Open(ckpt)
		if err != nil {
			t.Fatal(err)
		}
		m, err := arch.Load(ck)
		if err != nil {
			t.Fatal(err)
		}
		want := filepath.Join(dir, "mem.aot")
		if err := CompileModel(m, Source{}, opts, want); err != nil {
			t.Fatal(err)
		}
		s, err := arch.Open(ck)
		if err != nil {
			t.Fatal(err)
		}
		for _, jobs := range []int{1, 3} {
			got := filepath.Join(dir, "stream.aot")
			o := opts
			o.Jobs = jobs
			if err := compileModel(s.Config, archSource{s}, nil, Source{}, o, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(readFile(t, got), readFile(t, want)) {
				t.Fatalf("%s, %d jobs: the streamed artifact differs from the in-memory one", filepath.Base(ckpt), jobs)
			}
		}
		ck.Close()
	}

	// the quantized folder, against its dequantized model and parts
	m, _, err := qmodel.Load(qdir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := qmodel.Open(qdir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, float := range []bool{false, true} {
		o := opts
		o.FloatActivations = float
		want := filepath.Join(dir, "qmem.aot")
		if err := CompileModel(m, Source{Quantized: folderQuantized(t, qdir)}, o, want); err != nil {
			t.Fatal(err)
		}
		for _, jobs := range []int{1, 4} {
			got := filepath.Join(dir, "qstream.aot")
			o.Jobs = jobs
			if err := compileModel(f.Manifest.Config, folderSource{f}, nil, Source{}, o, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(readFile(t, got), readFile(t, want)) {
				t.Fatalf("quantized folder, float activations %v, %d jobs: the streamed artifact differs", float, jobs)
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

// TestCompileBoundedMemory guards the streaming: compiling a model of 26 MB
// of float32 whose largest tensor is 512 KB, the live heap sampled after
// every weight (after a collection, so without timing or garbage) grows by
// less than 16 largest tensors (the weights in flight and the graph and
// plans of 24 layers), far below the model. The
// same sampling over a compile that holds the loaded model exceeds the
// bound, so the check can fail.
func TestCompileBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and compiles a 13 MB model")
	}
	dir := t.TempDir()
	hf := filepath.Join(dir, "hf")
	if err := tinymodel.WriteLlama(hf, streamModel, 2); err != nil {
		t.Fatal(err)
	}
	const largest = 1024 * 128 * 4 // the embedding (and classifier) in float32
	const bound = 16 * largest
	// measure samples the live heap after every weight, or every
	// every-th one
	measure := func(every int, compileIt func(out string) error) (uint64, int) {
		base := liveHeap()
		var peak uint64
		n := 0
		afterWeight = func(string) {
			if n++; n%every == 0 {
				peak = max(peak, liveHeap())
			}
		}
		defer func() { afterWeight = nil }()
		if err := compileIt(filepath.Join(dir, fmt.Sprintf("m%d.aot", every))); err != nil {
			t.Fatal(err)
		}
		return peak - min(peak, base), n
	}
	grew, n := measure(1, func(out string) error {
		return CompileFile(hf, out, Options{ARLens: []int{4}, Ctx: 64, Jobs: 1})
	})
	t.Logf("streaming: live heap grew by at most %d KB over %d weights (bound %d KB)", grew>>10, n, bound>>10)
	if n < 200 {
		t.Fatalf("the hook saw %d weights", n)
	}
	if grew > bound {
		t.Errorf("streaming compile: live heap grew by %d bytes, more than %d (16 largest tensors)", grew, bound)
	}

	// control: the same measurement while the whole model is loaded
	held, _ := measure(40, func(out string) error {
		ck, err := detect.Open(hf)
		if err != nil {
			return err
		}
		defer ck.Close()
		m, err := arch.Load(ck)
		if err != nil {
			return err
		}
		return CompileModel(m, Source{}, Options{ARLens: []int{4}, Ctx: 64, Jobs: 1}, out)
	})
	t.Logf("in memory: live heap grew by %d KB", held>>10)
	if held <= bound {
		t.Errorf("holding the model grew the live heap by only %d bytes: the bound %d cannot catch it", held, bound)
	}
}
