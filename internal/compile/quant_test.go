package compile

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/plan"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/testutil"
)

func quantizeStories(t *testing.T, preset string) string {
	r, err := quant.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), preset)
	if _, err := qmodel.Quantize(testutil.Path(t, "models/stories260K/stories260K.gguf"), out, qmodel.Options{Recipe: r}); err != nil {
		t.Fatal(err)
	}
	return out
}

// folderQuantized reads the quantized tensors of a quantized folder (copies
// of their parts) and checks that they dequantize to the values Float reads.
func folderQuantized(t *testing.T, dir string) map[string]*quant.Quantized {
	t.Helper()
	f, err := qmodel.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	qs := map[string]*quant.Quantized{}
	for _, n := range f.Names() {
		q, err := f.Quantized(n)
		if err != nil {
			t.Fatal(err)
		}
		if q == nil {
			continue
		}
		q.Q, q.Codes = slices.Clone(q.Q), slices.Clone(q.Codes)
		v, err := f.Float(n)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(q.Dequantize(), v) {
			t.Fatalf("%s: parts do not dequantize to Float's values", n)
		}
		qs[n] = q
	}
	return qs
}

// TestQuantizedTensorsStored compiles the q4 folder of stories260K and
// reads every quantized tensor back from the artifact by the byte layout
// of plan.WeightLayout: integers, codes and scales must be the folder's.
func TestQuantizedTensorsStored(t *testing.T) {
	for _, preset := range []string{"q4", "w4a16-lpbq"} {
		dir := quantizeStories(t, preset)
		qs := folderQuantized(t, dir)
		path := filepath.Join(t.TempDir(), "m.aot")
		if err := CompileFile(dir, path, Options{Ctx: 64, FloatActivations: true}); err != nil {
			t.Fatal(err)
		}
		a, err := artifact.Open(path, artifact.OpenOptions{Verify: true})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for _, ti := range a.Tensors() {
			q := qs[ti.Name]
			if (q == nil) != (ti.Layout == "") {
				t.Fatalf("%s: %s tensor %s has layout %q", preset, ti.DType, ti.Name, ti.Layout)
			}
			if q == nil {
				continue
			}
			seen[ti.Layout]++
			l, _ := plan.ParseLayout(ti.Layout)
			p, _ := l.Parts(ti.Shape[0], ti.Shape[1])
			_, b, err := a.Tensor(ti.Name)
			if err != nil {
				t.Fatal(err)
			}
			ints := make([]int8, q.Rows*q.Cols)
			for i := range ints {
				ints[i] = int8(b[i])
			}
			sc := make([]float32, p.NScales)
			for i := range sc {
				sc[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[p.Scales+4*int64(i):]))
			}
			if !slices.Equal(ints, q.Q) || !slices.Equal(sc, q.Scales) {
				t.Fatalf("%s: %s: stored integers or scales differ", preset, ti.Name)
			}
			if p.Codes >= 0 && !slices.Equal(b[p.Codes:p.Codes+int64(len(q.Codes))], q.Codes) {
				t.Fatalf("%s: %s: stored codes differ", preset, ti.Name)
			}
		}
		a.Close()
		t.Logf("%s: layouts %v", preset, seen)
		if len(seen) < 2 {
			t.Fatalf("%s: layouts %v, want a 4-bit one and w8-rows", preset, seen)
		}
	}
}

// TestPackedTensorsStored: by default the weights whose input width is a
// multiple of 32 are stored packed ("-p" layouts), and each packed row
// decodes (kernel's Row) to the quantized folder's dequantized row, up to
// the float32 rounding of code*S; the 172-wide down projection of
// stories260K stays unpacked.
func TestPackedTensorsStored(t *testing.T) {
	for _, preset := range []string{"q4", "w4a16-lpbq", "w4a16-lpbq-b64", "w8a16"} {
		dir := quantizeStories(t, preset)
		qs := folderQuantized(t, dir)
		path := filepath.Join(t.TempDir(), "m.aot")
		if err := CompileFile(dir, path, Options{Ctx: 64}); err != nil {
			t.Fatal(err)
		}
		a, err := artifact.Open(path, artifact.OpenOptions{Verify: true})
		if err != nil {
			t.Fatal(err)
		}
		packed, plain := 0, 0
		for _, ti := range a.Tensors() {
			q := qs[ti.Name]
			if q == nil {
				continue
			}
			l, err := plan.ParseLayout(ti.Layout)
			if err != nil {
				t.Fatal(err)
			}
			if l.Packed != (ti.Shape[1]%32 == 0) {
				t.Fatalf("%s: %s %v has layout %s", preset, ti.Name, ti.Shape, ti.Layout)
			}
			if !l.Packed {
				plain++
				continue
			}
			packed++
			_, b, err := a.Tensor(ti.Name)
			if err != nil {
				t.Fatal(err)
			}
			row := packedRows(t, l, ti.Shape, b)
			want := q.Dequantize()
			N, K := int(ti.Shape[0]), int(ti.Shape[1])
			got := make([]float32, K)
			for n := range N {
				row(got, n)
				for k := range K {
					w := want[n*K+k]
					if d := math.Abs(float64(got[k] - w)); d > 2e-7*math.Abs(float64(w))+1e-12 {
						t.Fatalf("%s: %s [%d][%d]: packed %g, folder %g", preset, ti.Name, n, k, got[k], w)
					}
				}
			}
		}
		a.Close()
		if packed == 0 || (preset != "w8a16" && plain == 0) {
			t.Fatalf("%s: %d packed and %d unpacked quantized tensors", preset, packed, plain)
		}
	}
}

// packedRows views a packed tensor with the kernel package's types.
func packedRows(t *testing.T, l plan.WeightLayout, shape []int64, b []byte) func([]float32, int) {
	p, err := l.Parts(shape[0], shape[1])
	if err != nil {
		t.Fatal(err)
	}
	N, K := int(shape[0]), int(shape[1])
	fl := func(off, n int64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[off+4*int64(i):]))
		}
		return v
	}
	if l.Kind == plan.LayoutW8 {
		w := &kernel.W8{N: N, K: K, U: b[:N*K], Scales: fl(p.Scales, p.NScales)}
		if err := w.Check(); err != nil {
			t.Fatal(err)
		}
		return w.Row
	}
	w := &kernel.Q4{N: N, K: K, Nib: b[:N*K/2], Scales: fl(p.Scales, p.NScales)}
	if p.Codes >= 0 {
		w.Codes = b[p.Codes : p.Codes+int64(N*K/32)]
	}
	if p.Zeros >= 0 {
		w.Zeros = fl(p.Zeros, p.NScales)
	}
	if err := w.Check(); err != nil {
		t.Fatal(err)
	}
	return w.Row
}

// TestKVCalibration checks the u8 cache scales: one per key/value head of
// each layer, positive, and dependent on the calibration sequence; an
// unknown cache dtype is refused.
func TestKVCalibration(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	dir := t.TempDir()
	text := filepath.Join(dir, "calib.txt")
	if err := os.WriteFile(text, []byte("Once upon a time, there was a little girl named Lily. She liked to play in the park."), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []*plan.KVCache
	for i, o := range []Options{{KV: "u8"}, {KV: "u8", CalibText: text}} {
		o.Ctx = 128
		path := filepath.Join(dir, "m.aot")
		if err := CompileFile(src, path, o); err != nil {
			t.Fatal(err)
		}
		a, err := artifact.Open(path, artifact.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var man plan.Manifest
		if err := a.Manifest(&man); err != nil {
			t.Fatal(err)
		}
		a.Close()
		kc := man.KVCache
		if kc == nil || len(kc.K) != 5 || len(kc.V) != 5 {
			t.Fatalf("case %d: kv cache %+v", i, kc)
		}
		for l := range kc.K {
			if len(kc.K[l]) != 4 || len(kc.V[l]) != 4 { // stories260K: 4 key/value heads
				t.Fatalf("case %d: layer %d: %d and %d scales", i, l, len(kc.K[l]), len(kc.V[l]))
			}
			for _, s := range append(slices.Clone(kc.K[l]), kc.V[l]...) {
				if !(s > 0) {
					t.Fatalf("case %d: layer %d: scale %v", i, l, s)
				}
			}
		}
		got = append(got, kc)
	}
	if slices.Equal(got[0].K[0], got[1].K[0]) {
		t.Error("the calibration text did not change the scales")
	}
	err := CompileFile(src, filepath.Join(dir, "x.aot"), Options{KV: "i4"})
	if err == nil || !strings.Contains(err.Error(), `"i4"`) {
		t.Errorf("kv i4: %v", err)
	}
}

// TestEncodeQuantizedRefuses checks that parts of the wrong size are not
// written.
func TestEncodeQuantizedRefuses(t *testing.T) {
	w := make([]float32, 4*40)
	for i := range w {
		w[i] = float32(i%7) - 3
	}
	q, err := quant.Quantize(w, 4, 40, quant.Scheme{Kind: quant.KindLPBQ, Block: 16})
	if err != nil {
		t.Fatal(err)
	}
	l := lpbqLayout(q.Scheme)
	if _, err := encodeQuantized(l, q, []int64{4, 40}); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(q *quant.Quantized){
		"codes":  func(q *quant.Quantized) { q.Codes = q.Codes[1:] },
		"scales": func(q *quant.Quantized) { q.Scales = q.Scales[1:] },
		"ints":   func(q *quant.Quantized) { q.Q = q.Q[1:] },
	} {
		c := *q
		edit(&c)
		if _, err := encodeQuantized(l, &c, []int64{4, 40}); err == nil {
			t.Errorf("%s: short part accepted", name)
		}
	}
	if _, err := encodeQuantized(l, q, []int64{40, 4}); err == nil {
		t.Error("transposed shape accepted")
	}
}
