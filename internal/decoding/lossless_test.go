package decoding_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/decoding"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/sample"
	"github.com/aotlm/aotlm/internal/testutil"
)

// noisyDraft is a draft sequence whose logits favour a wrong token at
// every third step, so that verification rejects some of its drafts.
type noisyDraft struct {
	*engine.Session
	step int
	buf  []float32
}

func (d *noisyDraft) bend(l []float32) []float32 {
	d.step++
	if d.step%3 != 0 {
		return l
	}
	d.buf = append(d.buf[:0], l...)
	d.buf[(sample.Argmax(l)+1)%len(l)] += 1e3
	return d.buf
}

func (d *noisyDraft) PrefillContext(ctx context.Context, ids []int) ([]float32, error) {
	l, err := d.Session.PrefillContext(ctx, ids)
	if err != nil {
		return nil, err
	}
	return d.bend(l), nil
}

func (d *noisyDraft) Decode(id int) ([]float32, error) {
	l, err := d.Session.Decode(id)
	if err != nil {
		return nil, err
	}
	return d.bend(l), nil
}

// strategies are the strategies under test, the draft model being e
// itself behind noisyDraft (a guesser that is sometimes wrong).
func strategies(e *engine.Engine, mode engine.Mode) map[string]decoding.Strategy {
	off := decoding.Adaptive{Off: true}
	return map[string]decoding.Strategy{
		"lookahead":    &decoding.Lookahead{N: 3, W: 4, G: 4, Adaptive: off},
		"lookahead-n5": &decoding.Lookahead{N: 5, W: 2, G: 2, Adaptive: off},
		"lookup":       &decoding.Lookup{DraftMax: 6, Adaptive: off},
		"draft": &decoding.Draft{DraftMax: 5, Adaptive: off, NewSequence: func() (decoding.DraftSequence, error) {
			s, err := e.NewSession(engine.SessionOptions{Mode: mode, Threads: 1})
			return &noisyDraft{Session: s}, err
		}},
	}
}

// prompts returns a random prompt and a repetitive one (a short random
// phrase said four times), so that guesses get both rejected and taken.
func prompts(vocab int) [][]int {
	r := rand.New(rand.NewPCG(uint64(vocab), 11))
	random := make([]int, 10)
	for i := range random {
		random[i] = r.IntN(vocab)
	}
	phrase := make([]int, 5)
	for i := range phrase {
		phrase[i] = r.IntN(vocab)
	}
	var rep []int
	for range 4 {
		rep = append(rep, phrase...)
	}
	return [][]int{random, rep}
}

// checkLossless compares each strategy's greedy ids with plain greedy
// decoding for every prompt, and checks that guesses were accepted (and,
// from the noisy draft, rejected), so both paths ran.
func checkLossless(t *testing.T, e *engine.Engine, mode engine.Mode, ps [][]int, n int) {
	wants := make([][]int, len(ps))
	for i, p := range ps {
		wants[i], _ = generate(t, e, mode, p, n, nil, sample.Params{})
	}
	for name, st := range strategies(e, mode) {
		var accepted, rejected int
		for pi, p := range ps {
			want := wants[pi]
			got, stats := generate(t, e, mode, p, n, st, sample.Params{})
			if !slices.Equal(got, want) {
				t.Fatalf("%s, prompt %d: ids differ from plain greedy decoding\n got %v\nwant %v", name, pi, got, want)
			}
			accepted += stats.Accepted
			rejected += stats.Drafted - stats.Accepted
			if stats.Verify == 0 {
				t.Fatalf("%s, prompt %d: no verify pass ran (%v)", name, pi, stats)
			}
		}
		if accepted == 0 {
			t.Errorf("%s: no guess was accepted", name)
		}
		if name == "draft" && rejected == 0 {
			t.Errorf("%s: no guess of a noisy draft was rejected", name)
		}
	}
}

// TestLosslessFamilies: with greedy sampling, lookahead, prompt lookup
// and draft-model speculation give the ids of plain decoding on every
// transformer family fixture, hybrid and kv modes, f16 and u8 caches.
func TestLosslessFamilies(t *testing.T) {
	for _, f := range []string{"llama", "qwen2", "qwen3", "smollm3", "granite", "phi3", "glm", "gemma", "gemma3", "codegen2"} {
		m := loadModel(t, testutil.Path(t, "arch/"+f))
		for _, kv := range []string{"f16", "u8"} {
			e := compileKV(t, m, kv, 16, 96)
			for _, mode := range []engine.Mode{engine.ModeHybrid, engine.ModeKV} {
				t.Run(fmt.Sprintf("%s/%s/%v", f, kv, mode), func(t *testing.T) {
					checkLossless(t, e, mode, prompts(m.Config.Vocab), 40)
				})
			}
		}
	}
}

// TestLosslessStories: the same on stories260K with llama2.c's reference
// prompts (whose greedy ids plain decoding reproduces) and a repetitive
// prompt of our own.
func TestLosslessStories(t *testing.T) {
	m := storiesModel(t)
	ref := testutil.StoriesGreedy(t)
	var ps [][]int
	for _, c := range ref.Cases {
		ps = append(ps, c.PromptIDs)
	}
	ps = append(ps, prompts(m.Config.Vocab)[1])
	for _, kv := range []string{"f16", "u8"} {
		e := compileKV(t, m, kv, 16, 256)
		for _, mode := range []engine.Mode{engine.ModeHybrid, engine.ModeKV} {
			t.Run(fmt.Sprintf("%s/%v", kv, mode), func(t *testing.T) {
				checkLossless(t, e, mode, ps, 64)
			})
		}
	}
	// and f32, against llama2.c's own ids
	e := compileKV(t, m, "f32", 16, 256)
	for name, st := range strategies(e, engine.ModeHybrid) {
		for _, c := range ref.Cases {
			got, _ := generate(t, e, engine.ModeHybrid, c.PromptIDs, len(c.IDs), st, sample.Params{})
			if !slices.Equal(got, c.IDs) {
				t.Fatalf("%s, prompt %q: ids differ from llama2.c's\n got %v\nwant %v", name, c.Prompt, got, c.IDs)
			}
		}
	}
}

// TestRecurrentModels: a recurrent model takes only chain passes, so
// lookahead (tree passes) decodes plainly and says so, while prompt
// lookup and draft-model speculation verify their chains, the engine
// replaying the kept rows when a pass is cut short, and give the plain
// ids. RWKV-7 is a small checkpoint of the RWKV-7 code base (the family
// fixture folder holds no weights); qwen35 (gated delta rule) and lfm2
// (short convolutions) are the family fixtures.
func TestRecurrentModels(t *testing.T) {
	for _, path := range []string{"rwkv/260123_reverse_L2_only_rwkv7.pth", "arch/qwen35", "arch/lfm2"} {
		m := loadModel(t, testutil.Path(t, path))
		e := compileKV(t, m, "f32", 16, 96)
		for _, mode := range []engine.Mode{engine.ModeHybrid, engine.ModeKV} {
			t.Run(fmt.Sprintf("%s/%v", path, mode), func(t *testing.T) {
				ps := prompts(m.Config.Vocab)
				for name, st := range strategies(e, mode) {
					var verified, accepted, rejected int
					for pi, p := range ps {
						want, _ := generate(t, e, mode, p, 24, nil, sample.Params{})
						got, stats := generate(t, e, mode, p, 24, st, sample.Params{})
						if !slices.Equal(got, want) {
							t.Fatalf("%s, prompt %d: ids differ from plain greedy decoding\n got %v\nwant %v", name, pi, got, want)
						}
						verified += stats.Verify
						accepted += stats.Accepted
						rejected += stats.Drafted - stats.Accepted
						if strings.HasPrefix(name, "lookahead") && (stats.Verify != 0 || stats.Note == "") {
							t.Fatalf("%s: want plain decoding with a note, got %+v", name, stats)
						}
					}
					if strings.HasPrefix(name, "lookahead") {
						continue
					}
					if verified == 0 {
						t.Errorf("%s: no verify pass: the strategy did not run", name)
					}
					// the draft model is the target, bent: its guesses are
					// both kept and rejected, so passes are cut short
					if name == "draft" && (accepted == 0 || rejected == 0) {
						t.Errorf("%s: %d guesses kept, %d rejected: want both", name, accepted, rejected)
					}
				}
			})
		}
	}
}
