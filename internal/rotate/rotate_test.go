package rotate

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/op"
	"github.com/aotlm/aotlm/internal/quant"
	"github.com/aotlm/aotlm/internal/testutil"
)

func load(t *testing.T, path string) *arch.Model {
	t.Helper()
	ck, err := detect.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := arch.Load(ck)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func logits(t *testing.T, m *arch.Model, ids []int) []float32 {
	t.Helper()
	g, err := arch.Build(&m.Config, arch.BuildOptions{AllLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	in, err := graph.NewInterpreter(g, m.Weights, 2)
	if err != nil {
		t.Fatal(err)
	}
	out, _, err := in.Run(in.NewState(len(ids)), ids)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// refusals are the families R1 does not apply to, with the reason.
var refusals = map[string]string{
	"gemma3": "post-norm", // sandwich norms between the linears and the residual adds
}

// TestRotationExact checks that a model rotated by R1 (random Hadamard)
// and R2 (Hadamard) computes the same logits as the original, within 1e-4
// of the largest logit, on every family fixture and on stories260K, and
// that the weights did change; the families a rotation does not apply to
// are refused with their reason.
func TestRotationExact(t *testing.T) {
	type cs struct{ name, path string }
	var cases []cs
	for _, f := range []string{"llama", "qwen2", "qwen3", "smollm3", "granite", "phi3", "glm", "gemma", "gemma3"} {
		cases = append(cases, cs{f, testutil.Path(t, "arch/"+f)})
	}
	cases = append(cases, cs{"stories260K", testutil.Path(t, "models/stories260K/stories260K.gguf")})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := load(t, c.path)
			ids := []int{1, 5, 9, 2, 7, 3, 8, 4, 6, 10, 11, 3}
			if c.name != "stories260K" {
				var ref struct{ Tokens []int }
				if err := json.Unmarshal(testutil.ReadFile(t, "arch/"+c.name+"/reference.json"), &ref); err != nil {
					t.Fatal(err)
				}
				ids = ref.Tokens
			}
			want := logits(t, m, ids)
			before := append([]float32(nil), m.Weights[firstLinear(t, m)]...)
			rep, err := Apply(m, Options{R1: quant.RotationRandom, R2: quant.RotationHadamard, Seed: 7})
			if why, ok := refusals[c.name]; ok {
				if err == nil || !strings.Contains(err.Error(), why) {
					t.Fatalf("want a refusal naming %q, got %v", why, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := logits(t, m, ids)
			var scale, diff float64
			for i := range want {
				scale = max(scale, math.Abs(float64(want[i])))
				diff = max(diff, math.Abs(float64(got[i]-want[i])))
			}
			t.Logf("%s: %d linears, %d attention layers rotated, untied %v; max |logit diff| %.3g of max |logit| %.3g", c.name, rep.Linears, rep.Heads, rep.Untied, diff, scale)
			if diff > 1e-4*max(scale, 1) {
				t.Fatalf("rotated logits differ by %g (max |logit| %g)", diff, scale)
			}
			after := m.Weights[firstLinear(t, m)]
			var moved float64
			for i := range before {
				moved = max(moved, math.Abs(float64(after[i]-before[i])))
			}
			if moved == 0 || rep.Linears == 0 || rep.Heads == 0 {
				t.Fatalf("nothing rotated: %+v", rep)
			}
		})
	}
}

// TestOnlineRotationExact: the online rotations R3 (q and k after RoPE)
// and R4 (down_proj's input, its inverse folded into down_proj) keep the
// float model's logits within 1e-4 of the largest logit on every family
// fixture (Gemma 3 included: they do not cross its sandwich norms) and on
// stories260K, alone and on top of R1 and R2 where those apply; the graph
// then holds two hadamard steps per layer for R3 and one for R4, and
// down_proj's weights changed. RWKV-7 has neither and is refused.
func TestOnlineRotationExact(t *testing.T) {
	type cs struct{ name, path string }
	var cases []cs
	for _, f := range []string{"llama", "qwen2", "qwen3", "smollm3", "granite", "phi3", "glm", "gemma", "gemma3"} {
		cases = append(cases, cs{f, testutil.Path(t, "arch/"+f)})
	}
	cases = append(cases, cs{"stories260K", testutil.Path(t, "models/stories260K/stories260K.gguf")})
	for _, c := range cases {
		for _, withR12 := range []bool{false, true} {
			if withR12 && refusals[c.name] != "" {
				continue
			}
			t.Run(fmt.Sprintf("%s/r1r2=%v", c.name, withR12), func(t *testing.T) {
				m := load(t, c.path)
				ids := []int{1, 5, 9, 2, 7, 3, 8, 4, 6, 10, 11, 3}
				want := logits(t, m, ids)
				down := "model.layers.0.mlp.down_proj.weight"
				before := append([]float32(nil), m.Weights[down]...)
				opts := Options{R3: quant.RotationHadamard, R4: quant.RotationHadamard, Seed: 5}
				if withR12 {
					opts.R1, opts.R2 = quant.RotationRandom, quant.RotationHadamard
				}
				rep, err := Apply(m, opts)
				if err != nil {
					t.Fatal(err)
				}
				g, err := arch.Build(&m.Config, arch.BuildOptions{AllLogits: true})
				if err != nil {
					t.Fatal(err)
				}
				hadamards := 0
				for _, n := range g.Nodes {
					if n.Op == op.Hadamard {
						hadamards++
					}
				}
				if L := m.Config.Layers; hadamards != 3*L || rep.Down != L || rep.R3Block < 2 || rep.R4Block < 2 {
					t.Fatalf("%d hadamard steps for %d layers, report %+v", hadamards, L, rep)
				}
				got := logits(t, m, ids)
				var scale, diff float64
				for i := range want {
					scale = max(scale, math.Abs(float64(want[i])))
					diff = max(diff, math.Abs(float64(got[i]-want[i])))
				}
				t.Logf("blocks r3 %d, r4 %d; max |logit diff| %.3g of max |logit| %.3g", rep.R3Block, rep.R4Block, diff, scale)
				if diff > 1e-4*max(scale, 1) {
					t.Fatalf("rotated logits differ by %g (max |logit| %g)", diff, scale)
				}
				var moved float64
				for i, v := range m.Weights[down] {
					moved = max(moved, math.Abs(float64(v-before[i])))
				}
				if moved == 0 {
					t.Fatal("r4 left down_proj unchanged")
				}
			})
		}
	}
	t.Run("refusals", func(t *testing.T) {
		m := load(t, testutil.Path(t, "models/stories260K/stories260K.gguf"))
		if _, err := Apply(m, Options{R4: quant.RotationRandom}); err == nil {
			t.Error("a random online rotation was accepted")
		}
		if _, err := Apply(m, Options{R3: quant.RotationHadamard}); err != nil {
			t.Fatal(err)
		}
		if _, err := Apply(m, Options{R3: quant.RotationHadamard}); err == nil || !strings.Contains(err.Error(), "already") {
			t.Errorf("rotating twice: %v", err)
		}
	})
}

// firstLinear names the first linear weight of m's graph.
func firstLinear(t *testing.T, m *arch.Model) string {
	g, err := arch.Build(&m.Config, arch.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range g.Nodes {
		if n.Op == op.Linear {
			return n.Weight
		}
	}
	t.Fatal("no linear")
	return ""
}

// TestHadamardOrthogonal checks Q Q^T = I for both kinds and for a
// block-diagonal size (24 = 3 x 8), and that a size without a power-of-two
// factor of at least 8 is refused.
func TestHadamardOrthogonal(t *testing.T) {
	for _, c := range []struct {
		k quant.RotationKind
		n int
	}{{quant.RotationHadamard, 16}, {quant.RotationRandom, 16}, {quant.RotationRandom, 24}} {
		k, n := c.k, c.n
		h, err := NewHadamard(n, k, newRand(3))
		if err != nil {
			t.Fatal(err)
		}
		rows := make([][]float32, n)
		for i := range rows {
			rows[i] = make([]float32, n)
			rows[i][i] = 1
			h.Right(rows[i]) // row i of Q
		}
		for i := range rows {
			for j := range rows {
				var d float64
				for c := range rows[i] {
					d += float64(rows[i][c]) * float64(rows[j][c])
				}
				want := 0.0
				if i == j {
					want = 1
				}
				if math.Abs(d-want) > 1e-6 {
					t.Fatalf("%s: (Q Q^T)[%d][%d] = %v", k, i, j, d)
				}
			}
		}
	}
	if _, err := NewHadamard(12, quant.RotationHadamard, newRand(1)); err == nil {
		t.Error("size 12 (power-of-two factor 4) accepted")
	}
}
