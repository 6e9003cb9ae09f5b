package llama2c

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/tensor"
)

// checkV2 compares a version 2 checkpoint with the float weights it was
// written from. Error budget per value: scale/2 (the rounding of w/scale to
// an integer; scale = max|group|/127) plus 4 float32 ulps of |w| for the
// division and the product.
func checkV2(t *testing.T, c *Checkpoint, weights map[string][]float32) {
	t.Helper()
	g := c.Config().GroupSize
	var worstRatio float64
	for name, w := range weights {
		ti, ok := format.Find(c, name)
		if !ok {
			t.Errorf("missing %s", name)
			continue
		}
		got, err := c.ReadFloat32(name)
		if err != nil {
			t.Fatal(err)
		}
		if ti.DType == tensor.F32 {
			if !bitEqual(got, w) {
				t.Errorf("%s: float32 tensor changed", name)
			}
			continue
		}
		q, scales, err := c.Quantized(name)
		if err != nil || len(q) != len(w) || len(scales) != len(w)/g {
			t.Fatalf("%s: Quantized %d %d %v", name, len(q), len(scales), err)
		}
		for gi, s := range scales {
			var maxQ int
			var maxW float64
			for i := gi * g; i < (gi+1)*g; i++ {
				maxQ = max(maxQ, int(math.Abs(float64(q[i]))))
				maxW = max(maxW, math.Abs(float64(w[i])))
				diff := math.Abs(float64(got[i]) - float64(w[i]))
				budget := float64(s)/2 + 4*math.Abs(float64(w[i]))*0x1p-24
				if diff > budget {
					t.Fatalf("%s[%d]: |%v - %v| = %g > budget %g", name, i, got[i], w[i], diff, budget)
				}
				if s > 0 {
					worstRatio = max(worstRatio, diff/float64(s))
				}
			}
			if maxW > 0 && maxQ != 127 {
				t.Errorf("%s group %d: largest |q| is %d, want 127", name, gi, maxQ)
			}
			if math.Abs(float64(s)-maxW/127) > maxW*1e-6 {
				t.Errorf("%s group %d: scale %g, want max|w|/127 = %g", name, gi, s, maxW/127)
			}
		}
	}
	t.Logf("worst |err|/scale: %.4f (budget 0.5)", worstRatio)
}

func TestQuantizeDefinition(t *testing.T) {
	// scale = 1/127; w/scale = 127, -63.5, 31.75, 0 -> half to even gives -64.
	q, s := Quantize([]float32{1, -0.5, 0.25, 0, 0, 0, 0, 0}, 4)
	if s[0] != float32(1)/127 || s[1] != 0 {
		t.Errorf("scales %v", s)
	}
	want := []int8{127, -64, 32, 0, 0, 0, 0, 0}
	for i := range want {
		if q[i] != want[i] {
			t.Fatalf("q = %v, want %v", q, want)
		}
	}
}

func TestRoundTripRandom(t *testing.T) {
	for _, shared := range []bool{true, false} {
		cfg := smallConfig(shared)
		m := randomModel(cfg, 11)
		for _, version := range []int{0, 1, 2} {
			writer := []func(string, Config, map[string][]float32) error{WriteV0, WriteV1, WriteV2}[version]
			b := encodeFile(t, writer, cfg, m)
			c, err := openBytes(b)
			if err != nil {
				t.Fatalf("shared=%v v%d: %v", shared, version, err)
			}
			got := c.Config()
			if got.Dim != 16 || got.NKVHeads != 2 || got.SharedClassifier != shared || c.Version() != version {
				t.Fatalf("shared=%v v%d: config %+v version %d", shared, version, got, c.Version())
			}
			extra := 0
			if version == 0 {
				extra = 2
			}
			if len(c.Tensors()) != len(m)+extra {
				t.Errorf("shared=%v v%d: %d tensors, want %d", shared, version, len(c.Tensors()), len(m)+extra)
			}
			if _, ok := format.Find(c, "output.weight"); ok == shared {
				t.Errorf("shared=%v v%d: output.weight listed = %v", shared, version, ok)
			}
			if version == 2 {
				if got.GroupSize != 16 { // 64 halved until it divides dim 16
					t.Errorf("group size %d, want 16", got.GroupSize)
				}
				if b[36] != map[bool]byte{false: 0, true: 1}[shared] || binary.LittleEndian.Uint32(b[37:]) != 16 {
					t.Errorf("header bytes 36..40 = %v", b[36:41])
				}
				checkV2(t, c, m)
				continue
			}
			for name, v := range m {
				r, err := c.ReadFloat32(name)
				if err != nil || !bitEqual(r, v) {
					t.Errorf("shared=%v v%d: %s differs (%v)", shared, version, name, err)
				}
			}
			if version == 0 {
				re, _ := c.ReadFloat32(NameFreqReal)
				wantRe, _ := FreqCis(cfg.SeqLen, cfg.HeadSize(), RopeTheta)
				if !bitEqual(re, wantRe) {
					t.Error("v0 freq_cis_real is not the computed table")
				}
				if vocab := int32(binary.LittleEndian.Uint32(b[20:])); (vocab < 0) == shared {
					t.Errorf("v0 header vocab %d for shared=%v", vocab, shared)
				}
			}
		}
	}
}

func TestWriteRejects(t *testing.T) {
	cfg := smallConfig(true)
	m := randomModel(cfg, 1)
	dir := t.TempDir()
	bad := map[string]func() (Config, map[string][]float32){
		"missing tensor": func() (Config, map[string][]float32) {
			m2 := copyMap(m)
			delete(m2, "norm.weight")
			return cfg, m2
		},
		"wrong length": func() (Config, map[string][]float32) {
			m2 := copyMap(m)
			m2["norm.weight"] = m2["norm.weight"][1:]
			return cfg, m2
		},
		"output with shared classifier": func() (Config, map[string][]float32) {
			m2 := copyMap(m)
			m2["output.weight"] = m2["tok_embeddings.weight"]
			return cfg, m2
		},
		"bad config": func() (Config, map[string][]float32) {
			c := cfg
			c.NHeads = 3
			return c, m
		},
	}
	for name, mk := range bad {
		c, mm := mk()
		if err := WriteV1(dir+"/x.bin", c, mm); err == nil {
			t.Errorf("%s: written", name)
		}
	}
}

func copyMap(m map[string][]float32) map[string][]float32 {
	out := map[string][]float32{}
	for k, v := range m {
		out[k] = v
	}
	return out
}
