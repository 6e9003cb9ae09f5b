package engine_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestSaveLoadState saves a session after a prompt and a few decode steps
// and loads it into a fresh session (of another context size): the new
// session decodes the same logits, bit for bit, as the first one going
// on, for an f32, binary16, uint8 and 4-bit cache, a recurrent model (RWKV-7),
// one with convolution state and attention (LFM2) and one with
// sliding-window layers kept in rings (Gemma 4).
func TestSaveLoadState(t *testing.T) {
	cases := []struct {
		name string
		e    func() *engine.Engine
	}{
		{"stories-f32", func() *engine.Engine { return compileKV(t, storiesModel(t), "f32") }},
		{"stories-f16", func() *engine.Engine { return compileKV(t, storiesModel(t), "f16") }},
		{"stories-u8", func() *engine.Engine { return compileKV(t, storiesModel(t), "u8") }},
		{"stories-q4", func() *engine.Engine { return compileKV(t, storiesModel(t), "q4") }},
		{"stories-q4v", func() *engine.Engine { return compileKV(t, storiesModel(t), "q4v") }},
		{"rwkv7", func() *engine.Engine {
			return compileKV(t, loadModel(t, testutil.Path(t, "rwkv/260123_reverse_L2_only_rwkv7.pth")), "f32")
		}},
		{"lfm2", func() *engine.Engine { return compileModel(t, loadModel(t, testutil.Path(t, "arch/lfm2")), 64, 8) }},
		{"gemma4", func() *engine.Engine { return compileModel(t, loadModel(t, testutil.Path(t, "arch/gemma4")), 64, 8) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := c.e()
			a := newSession(t, e, engine.SessionOptions{Threads: 1})
			prompt := []int{1, 5, 9, 3, 7, 11, 2, 6, 10, 4, 8} // within RWKV-7's 12 ids
			if c.name == "gemma4" {                            // past its rings of 24 slots
				prompt = slices.Concat(prompt, prompt, prompt)
			}
			if _, err := a.Prefill(prompt); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if _, err := a.Decode(2 + i); err != nil {
					t.Fatal(err)
				}
			}
			var buf bytes.Buffer
			if err := a.SaveState(&buf); err != nil {
				t.Fatal(err)
			}
			saved := buf.Bytes()
			// another context size, except where the convolution history
			// or the sliding-window rings are sized by it (LFM2's, Gemma 4's)
			ctx := 40
			if c.name == "lfm2" || c.name == "gemma4" {
				ctx = 0
			}
			b := newSession(t, e, engine.SessionOptions{Threads: 1, Context: ctx})
			if _, err := b.Prefill([]int{7, 7, 7}); err != nil { // contents the load replaces
				t.Fatal(err)
			}
			if err := b.LoadState(bytes.NewReader(saved)); err != nil {
				t.Fatal(err)
			}
			if b.Pos() != a.Pos() {
				t.Fatalf("loaded at position %d, saved at %d", b.Pos(), a.Pos())
			}
			for i, id := range []int{3, 8, 1, 10, 4} {
				la, err := a.Decode(id)
				if err != nil {
					t.Fatal(err)
				}
				la = slices.Clone(la)
				lb, err := b.Decode(id)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(la, lb) {
					t.Fatalf("step %d after the load: the logits differ from the saved session's", i)
				}
			}
			// a damaged or cut state is refused and leaves the session empty
			for name, bad := range map[string][]byte{
				"cut":       saved[:len(saved)-3],
				"longer":    append(slices.Clone(saved), 0),
				"not state": []byte("hello, world, this is not a state"),
				"empty":     nil,
			} {
				err := b.LoadState(bytes.NewReader(bad))
				if err == nil || !strings.Contains(err.Error(), "state") {
					t.Errorf("%s data: error %v", name, err)
				}
				if b.Pos() != 0 {
					t.Errorf("%s data: the session holds %d positions after the refusal", name, b.Pos())
				}
			}
			// a context shorter than the state is refused
			small := newSession(t, e, engine.SessionOptions{Threads: 1, Context: 8})
			if err := small.LoadState(bytes.NewReader(saved)); err == nil {
				t.Error("a state of 14 positions loaded into a context of 8")
			}
		})
	}
	// another model's state is refused
	f32 := newSession(t, compileKV(t, storiesModel(t), "f32"), engine.SessionOptions{Threads: 1})
	u8 := newSession(t, compileKV(t, storiesModel(t), "u8"), engine.SessionOptions{Threads: 1})
	if _, err := f32.Prefill([]int{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := f32.SaveState(&buf); err != nil {
		t.Fatal(err)
	}
	if err := u8.LoadState(&buf); err == nil || !strings.Contains(err.Error(), "another model") {
		t.Errorf("an f32 cache's state into a uint8 cache: error %v", err)
	}
}
