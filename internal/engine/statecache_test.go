package engine_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestDefaultStateSnapshots checks the state cache's default size: every
// set of a small state up to the cap, fewer as the state grows, never
// fewer than MinStateSnapshots, none without a state.
func TestDefaultStateSnapshots(t *testing.T) {
	for _, c := range []struct {
		bytes int64
		want  int
	}{
		{0, 0}, {1 << 10, 17}, {8 << 20, 16}, {16 << 20, 8}, {40 << 20, 3}, {1 << 30, engine.MinStateSnapshots},
	} {
		if got := engine.DefaultStateSnapshots(c.bytes); got != c.want {
			t.Errorf("state of %d bytes: %d sets, want %d", c.bytes, got, c.want)
		}
	}
}

// TestRWKV7StateCache checks that an RWKV-7 session's default state cache
// rewinds several decode steps back: decoding the same tokens again gives
// the same logits, and a boundary older than the cache is refused.
func TestRWKV7StateCache(t *testing.T) {
	m := loadModel(t, testutil.Path(t, "rwkv/260123_reverse_L2_only_rwkv7.pth"))
	e := compileKV(t, m, "f32")
	s := newSession(t, e, engine.SessionOptions{Threads: 1})
	if mem := s.StateMemory(); mem.Sets != 17 || mem.SetBytes <= 0 || mem.ConvWindow != 0 {
		t.Fatalf("state memory %+v: want 17 sets of a state and no conv window", mem)
	}
	if _, err := s.Prefill([]int{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	var logits [][]float32
	for i := range 20 {
		l, err := s.Decode(1 + i%11)
		if err != nil {
			t.Fatal(err)
		}
		logits = append(logits, slices.Clone(l))
	}
	// boundaries kept: the committed position 23 and the 16 before it
	if err := s.Rewind(6); err == nil {
		t.Error("rewind to a boundary older than the state cache: accepted")
	}
	for _, back := range []int{16, 9, 1} {
		at := 23 - back
		if err := s.Rewind(at); err != nil {
			t.Fatalf("rewind %d steps back: %v", back, err)
		}
		for i := at - 3; i < 20; i++ {
			l, err := s.Decode(1 + i%11)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(l, logits[i]); d != 0 {
				t.Fatalf("%s: decode %d differs by %.3g", fmt.Sprintf("rewind to %d", at), i, d)
			}
		}
	}
}

// TestLFM2StateMemory checks that a session of a model whose only state
// is short convolutions counts its conv window beside its state cache.
func TestLFM2StateMemory(t *testing.T) {
	e := compileModel(t, loadModel(t, testutil.Path(t, "arch/lfm2")), 256, 8)
	s := newSession(t, e, engine.SessionOptions{Mode: engine.ModeHybrid, Threads: 2, StateSnapshots: 2})
	mem := s.StateMemory()
	if mem.Sets != 2 || mem.SetBytes <= 0 || mem.ConvWindow <= 0 {
		t.Fatalf("state memory %+v: want 2 sets and a conv window", mem)
	}
	if mem.Total() != 2*mem.SetBytes+mem.ConvWindow {
		t.Errorf("total %d of %+v", mem.Total(), mem)
	}
}

// TestStateBudget: a session's state cache keeps as many sets as its
// byte budget holds (at least MinStateSnapshots, at most the default
// cap), as StateSnapshotsWithin says; the default budget is the default;
// a negative budget is refused.
func TestStateBudget(t *testing.T) {
	for _, c := range []struct {
		set, budget int64
		want        int
	}{
		{1 << 20, 0, 17}, {1 << 20, 5 << 20, 5}, {1 << 20, 1 << 20, engine.MinStateSnapshots}, {1 << 20, 1 << 40, 17},
		{0, 5 << 20, 0}, {16 << 20, engine.DefaultStateBudget, 8},
	} {
		if got := engine.StateSnapshotsWithin(c.set, c.budget); got != c.want {
			t.Errorf("state of %d bytes within %d: %d sets, want %d", c.set, c.budget, got, c.want)
		}
	}
	e := compileModel(t, loadModel(t, testutil.Path(t, "arch/qwen35")), 64, 8)
	one := newSession(t, e, engine.SessionOptions{Threads: 2}).StateMemory()
	if one.Sets != engine.DefaultStateSnapshots(one.SetBytes) {
		t.Fatalf("default session: %+v", one)
	}
	for _, sets := range []int{3, 5, 11} {
		m := newSession(t, e, engine.SessionOptions{Threads: 2, StateBudget: int64(sets)*one.SetBytes + 7}).StateMemory()
		if m.Sets != sets || m.SetBytes != one.SetBytes {
			t.Errorf("a budget of %d sets and 7 bytes: %+v", sets, m)
		}
	}
	if _, err := e.NewSession(engine.SessionOptions{StateBudget: -1}); err == nil {
		t.Error("a negative state budget was accepted")
	}
}
