package engine_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
)

// randomAdapter returns an adapter of rank 4 on every projection of m.
func randomAdapter(t *testing.T, m *arch.Model, name string, seed uint64) *engine.Adapter {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	var ls []engine.AdapterLinear
	for w, v := range m.Weights {
		if !strings.HasSuffix(w, "_proj.weight") {
			continue
		}
		in := len(v) / outRows(t, m, w)
		out := len(v) / in
		l := engine.AdapterLinear{Weight: w, Rank: 4, In: in, Out: out, Scale: 2,
			A: make([]float32, 4*in), B: make([]float32, out*4)}
		for i := range l.A {
			l.A[i] = float32(rng.NormFloat64() * 0.1)
		}
		for i := range l.B {
			l.B[i] = float32(rng.NormFloat64() * 0.1)
		}
		ls = append(ls, l)
	}
	a, err := engine.NewAdapter(name, ls, engine.AdapterF32)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// outRows returns the rows of weight w of m from its graph's shapes.
func outRows(t *testing.T, m *arch.Model, w string) int {
	g, err := arch.Build(&m.Config, arch.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return g.Weights[w][0]
}

// TestAdapterDecodeBatch: three sessions, two with different adapters
// (at different scales) and one with none, decode in one batched pass
// per step, and each one's logits match a twin decoding alone with the
// same choice; the adapters change the logits. Every step is split
// across two workers.
func TestAdapterDecodeBatch(t *testing.T) {
	defer engine.SplitEverything()()
	m := loadModel(t, testutil.Path(t, "arch/qwen3"))
	e := compileModel(t, m, 64, 8)
	a, b := randomAdapter(t, m, "a", 1), randomAdapter(t, m, "b", 2)
	for _, ad := range []*engine.Adapter{a, b} {
		if err := e.AddAdapter(ad); err != nil {
			t.Fatal(err)
		}
	}
	choice := []struct {
		ad    *engine.Adapter
		scale float32
	}{{a, 1}, {b, 0.7}, {nil, 0}}
	var batch, alone []*engine.Session
	for i, c := range choice {
		for _, list := range []*[]*engine.Session{&batch, &alone} {
			s := newSession(t, e, engine.SessionOptions{Threads: 2})
			if err := s.SetAdapter(c.ad, c.scale); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Prefill([]int{5 + i, 9, 13 + 2*i}); err != nil {
				t.Fatal(err)
			}
			*list = append(*list, s)
		}
	}
	ids := []int{7, 7, 7}
	for step := 0; step < 4; step++ {
		got, err := e.DecodeBatch(batch, ids)
		if err != nil {
			t.Fatal(err)
		}
		var rows [][]float32
		for i, s := range alone {
			want, err := s.Decode(ids[i])
			if err != nil {
				t.Fatal(err)
			}
			rows = append(rows, append([]float32(nil), want...))
			if d := maxDiff(got[i], want); d > 1e-4 {
				t.Errorf("step %d, session %d: batched logits differ from decoding alone by %.3g", step, i, d)
			}
		}
		if d := maxDiff(rows[0], rows[2]); step == 0 && d < 1e-2 {
			t.Errorf("the adapter moves the logits by only %.3g", d)
		}
		for i := range ids {
			ids[i] = argmax(rows[i])
		}
	}
}

// TestAdapterRefusals: adapters that do not fit the model are refused,
// and a session may only choose a loaded adapter.
func TestAdapterRefusals(t *testing.T) {
	m := loadModel(t, testutil.Path(t, "arch/qwen3"))
	e := compileModel(t, m, 32, 4)
	bad := []engine.AdapterLinear{
		{Weight: "model.layers.0.self_attn.q_proj.weight", Rank: 2, In: 3, Out: 4, A: make([]float32, 6), B: make([]float32, 8)},
		{Weight: "no.such.weight", Rank: 1, In: 64, Out: 64, A: make([]float32, 64), B: make([]float32, 64)},
	}
	for _, l := range bad {
		a, err := engine.NewAdapter("x", []engine.AdapterLinear{l}, engine.AdapterF32)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.AddAdapter(a); err == nil || !strings.Contains(err.Error(), l.Weight) {
			t.Errorf("%s: got %v, want an error naming it", l.Weight, err)
		}
	}
	if _, err := engine.NewAdapter("x", []engine.AdapterLinear{{Weight: "w", Rank: 1, In: 2, Out: 2, A: make([]float32, 3), B: make([]float32, 2)}}, engine.AdapterF32); err == nil {
		t.Error("an A of the wrong size was accepted")
	}
	a := randomAdapter(t, m, "a", 1)
	s := newSession(t, e, engine.SessionOptions{})
	if err := s.SetAdapter(a, 1); err == nil {
		t.Error("a session chose an adapter the engine has not loaded")
	}
	if err := e.AddAdapter(a); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAdapter(a, 1); err != nil {
		t.Fatal(err)
	}
	if !e.RemoveAdapter("a") || len(e.Adapters()) != 0 {
		t.Error("RemoveAdapter did not remove it")
	}
}
