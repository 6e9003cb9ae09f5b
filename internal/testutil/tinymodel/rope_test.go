package tinymodel

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/format/llama2c"
)

// matVec returns w x for w [rows, len(x)].
func matVec(w []float32, x []float64) []float64 {
	cols := len(x)
	out := make([]float64, len(w)/cols)
	for r := range out {
		for c, xv := range x {
			out[r] += float64(w[r*cols+c]) * xv
		}
	}
	return out
}

// ropeHalf applies Hugging Face rotate-half RoPE at pos to every head:
// dims i and i+hd/2 form a pair rotated by pos * theta^(-2i/hd).
func ropeHalf(v []float64, hd, pos int, theta float64) {
	for h := 0; h < len(v); h += hd {
		for i := range hd / 2 {
			a := float64(pos) * math.Pow(theta, -float64(2*i)/float64(hd))
			x, y := v[h+i], v[h+i+hd/2]
			v[h+i], v[h+i+hd/2] = x*math.Cos(a)-y*math.Sin(a), x*math.Sin(a)+y*math.Cos(a)
		}
	}
}

// ropeInterleaved applies llama2.c RoPE: dims 2i and 2i+1 form a pair.
func ropeInterleaved(v []float64, hd, pos int, theta float64) {
	for h := 0; h < len(v); h += hd {
		for i := range hd / 2 {
			a := float64(pos) * math.Pow(theta, -float64(2*i)/float64(hd))
			x, y := v[h+2*i], v[h+2*i+1]
			v[h+2*i], v[h+2*i+1] = x*math.Cos(a)-y*math.Sin(a), x*math.Sin(a)+y*math.Cos(a)
		}
	}
}

// TestLlama2CSameFunction checks that the llama2.c file computes the same
// attention inputs as the Hugging Face weights: every non-q/k tensor is
// identical, and q·k scores after each file's own RoPE convention agree
// (to 1e-9, float64 arithmetic on identical float32 weights).
func TestLlama2CSameFunction(t *testing.T) {
	cfg := Default()
	path := filepath.Join(t.TempDir(), "m.bin")
	if err := WriteLlama2C(path, cfg, 5, 1); err != nil {
		t.Fatal(err)
	}
	c, err := llama2c.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hf, _ := Llama(cfg, 5)
	for name, w := range hf {
		if strings.Contains(name, "q_proj") || strings.Contains(name, "k_proj") {
			continue
		}
		got, err := c.ReadFloat32(metaName(name))
		if err != nil || !bitEqual(got, w.Data) {
			t.Errorf("%s -> %s differs (%v)", name, metaName(name), err)
		}
	}
	r := rand.New(rand.NewPCG(1, 1))
	x := make([]float64, cfg.HiddenSize)
	for i := range x {
		x[i] = r.NormFloat64()
	}
	hd := cfg.HiddenSize / cfg.NumHeads
	group := cfg.NumHeads / cfg.NumKVHeads
	for layer := range cfg.NumLayers {
		wq, _ := c.ReadFloat32(metaName(hfName(layer, "q")))
		wk, _ := c.ReadFloat32(metaName(hfName(layer, "k")))
		for _, pos := range []int{0, 1, 7, 100} {
			qh := matVec(hf[hfName(layer, "q")].Data, x)
			kh := matVec(hf[hfName(layer, "k")].Data, x)
			ql, kl := matVec(wq, x), matVec(wk, x)
			ropeHalf(qh, hd, pos, 10000)
			ropeHalf(kh, hd, 3, 10000)
			ropeInterleaved(ql, hd, pos, 10000)
			ropeInterleaved(kl, hd, 3, 10000)
			for h := range cfg.NumHeads {
				kv := h / group
				var sh, sl float64
				for i := range hd {
					sh += qh[h*hd+i] * kh[kv*hd+i]
					sl += ql[h*hd+i] * kl[kv*hd+i]
				}
				if math.Abs(sh-sl) > 1e-9 {
					t.Fatalf("layer %d pos %d head %d: score %g (HF) vs %g (llama2.c)", layer, pos, h, sh, sl)
				}
			}
		}
	}
}

func hfName(layer int, p string) string {
	return "model.layers." + string(rune('0'+layer)) + ".self_attn." + p + "_proj.weight"
}
