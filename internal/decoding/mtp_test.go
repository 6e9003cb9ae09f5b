package decoding_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/decoding"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/sample"
	"github.com/aotlm/aotlm/internal/testutil"
)

// compileFileKV compiles the checkpoint at src (with its draft head) with
// plans of 1 and arLen rows and a cache of ctx positions stored as kv.
func compileFileKV(t testing.TB, src, kv string, arLen, ctx int) *engine.Engine {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.aot")
	if err := compile.CompileFile(src, path, compile.Options{ARLens: []int{arLen}, Ctx: ctx, KV: kv}); err != nil {
		t.Fatal(err)
	}
	e, err := engine.OpenWith(path, engine.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestMTPLossless: speculation with Qwen3.5's draft head gives the ids of
// plain greedy decoding on the qwen35 fixture (HF folder and GGUF), in
// hybrid and kv modes, with f32 and f16 caches, for a random prompt, a
// repetitive one and the fixture's own tokens, and runs verify passes.
func TestMTPLossless(t *testing.T) {
	var ref struct {
		Tokens []int `json:"tokens"`
	}
	if err := json.Unmarshal(testutil.ReadFile(t, "arch/qwen35/reference.json"), &ref); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"arch/qwen35", "arch/qwen35/model.gguf"} {
		for _, kv := range []string{"f32", "f16"} {
			e := compileFileKV(t, testutil.Path(t, src), kv, 8, 128)
			ps := append(prompts(e.Manifest().Vocab), ref.Tokens[:20])
			for _, mode := range []engine.Mode{engine.ModeHybrid, engine.ModeKV} {
				t.Run(fmt.Sprintf("%s/%s/%v", src, kv, mode), func(t *testing.T) {
					for _, k := range []int{1, 3, 7} {
						st := &decoding.MTP{DraftMax: k, Adaptive: decoding.Adaptive{Off: true}}
						var stats decoding.Stats
						for pi, p := range ps {
							want, _ := generate(t, e, mode, p, 40, nil, sample.Params{})
							got, s := generate(t, e, mode, p, 40, st, sample.Params{})
							if !slices.Equal(got, want) {
								t.Fatalf("draft %d, prompt %d: ids differ from plain greedy decoding\n got %v\nwant %v", k, pi, got, want)
							}
							if s.Note != "" {
								t.Fatalf("draft %d, prompt %d: the strategy did not run: %s", k, pi, s.Note)
							}
							stats.Verify += s.Verify
							stats.Passes += s.Passes
							stats.Tokens += s.Tokens
							stats.Drafted += s.Drafted
							stats.Accepted += s.Accepted
						}
						t.Logf("draft %d: %d verify passes, %d/%d drafts kept, %.2f tokens/pass", k, stats.Verify, stats.Accepted, stats.Drafted, stats.TokensPerPass())
						if stats.Verify == 0 || stats.Drafted == 0 {
							t.Errorf("draft %d: no verify pass ran (%+v)", k, stats)
						}
						if stats.Accepted > 0 && stats.TokensPerPass() <= 1 {
							t.Errorf("draft %d: %d drafts kept but %.2f tokens per pass", k, stats.Accepted, stats.TokensPerPass())
						}
					}
				})
			}
		}
	}
}

// recordingTarget records the rows of every pass of more than one row
// (the verify passes) and the position each started at.
type recordingTarget struct {
	*engine.Session
	ids  [][]int
	from []int
}

func (r *recordingTarget) Run(p *engine.Pass) (engine.Logits, error) {
	if len(p.IDs) > 1 {
		r.ids = append(r.ids, append([]int(nil), p.IDs...))
		r.from = append(r.from, r.Pos())
	}
	return r.Session.Run(p)
}

// TestMTPDraftsInStep checks that the head drafts what it should: the
// first draft of every round equals (within 1e-3 of the top logit) the
// head's own choice computed apart, over the plain greedy sequence, with
// the target's hidden row of each position and the token after it, from
// the first position of the prompt's last prefill pass on. The head's cache is then kept in step
// through rejected rounds, with drafts of 1 and of up to 4 tokens (whose
// drafted rows must be dropped).
func TestMTPDraftsInStep(t *testing.T) {
	e := compileFileKV(t, testutil.Path(t, "arch/qwen35"), "f32", 8, 128)
	const n = 30
	for pi, p := range prompts(e.Manifest().Vocab) {
		// the plain sequence and the target's hidden row of every position
		s := newSession(t, e, engine.ModeKV)
		seq := append([]int(nil), p...)
		hidden := map[int][]float32{}
		var logits []float32
		for j, id := range p {
			var err error
			if logits, err = s.Decode(id); err != nil {
				t.Fatal(err)
			}
			hidden[j] = append([]float32(nil), s.Hidden(j)...)
		}
		smp := sample.New(sample.Params{})
		for len(seq) < len(p)+n {
			id := smp.Sample(logits, nil)
			seq = append(seq, id)
			var err error
			if logits, err = s.Decode(id); err != nil {
				t.Fatal(err)
			}
			hidden[len(seq)-1] = append([]float32(nil), s.Hidden(len(seq)-1)...)
		}
		// the head's row j reads (seq[j+1], hidden j) and predicts seq[j+2]
		head, err := s.NewDraftHead()
		if err != nil {
			t.Fatal(err)
		}
		defer head.Close()
		// the decoder's head starts at the first row of the prompt's last
		// prefill pass (of 8 rows in hybrid mode)
		base := (len(p) - 1) / 8 * 8
		want := map[int][]float32{} // head logits of row j
		for j := base; j+1 < len(seq); j++ {
			P := head.PosComponents()
			pos := slices.Repeat([]int{j + 1}, P)
			out, err := head.Run(&engine.Pass{IDs: []int{seq[j+1]}, Rows: hidden[j], Positions: pos, Logits: []int{0}})
			if err != nil {
				t.Fatal(err)
			}
			want[j] = append([]float32(nil), out.Row(0)...)
			if err := head.Commit([]int{0}); err != nil {
				t.Fatal(err)
			}
		}
		for _, k := range []int{1, 4} {
			tgt := newSession(t, e, engine.ModeHybrid)
			rec := &recordingTarget{Session: tgt}
			first, err := tgt.PrefillContext(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			dec, err := (&decoding.MTP{DraftMax: k, Adaptive: decoding.Adaptive{Off: true}}).Start(rec, p, smp)
			if err != nil {
				t.Fatal(err)
			}
			out := []int{smp.Sample(first, nil)}
			for len(out) < n {
				next, err := dec.Next(out[len(out)-1], out)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, next...)
			}
			dec.Close()
			if !slices.Equal(out[:n], seq[len(p):]) {
				t.Fatalf("prompt %d, draft %d: ids differ from plain greedy decoding", pi, k)
			}
			if len(rec.ids) == 0 {
				t.Fatalf("prompt %d, draft %d: no verify pass", pi, k)
			}
			for i, ids := range rec.ids {
				j := rec.from[i] - 1 // the row of the position before the pass
				row, ok := want[j]
				if !ok {
					continue // past the reference's end
				}
				if d := row[argmaxOf(row)] - row[ids[1]]; d > 1e-3 {
					t.Errorf("prompt %d, draft %d: the round at position %d drafted %d, %.3g below the head's choice %d",
						pi, k, rec.from[i], ids[1], d, argmaxOf(row))
				}
			}
		}
	}
}

func argmaxOf(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// TestMTPSamplingDistribution: with sampling (temperature 1), speculation
// with the qwen35 fixture's draft head draws the second generated token
// (the first one the head drafts) with the target's own law: over 3000
// fixed seeds its counts pass Pearson's chi-square test against the exact
// marginal (summed over the first token) at significance level 0.001, and
// both acceptances and rejections happen.
func TestMTPSamplingDistribution(t *testing.T) {
	const samples = 3000
	e := compileFileKV(t, testutil.Path(t, "arch/qwen35"), "f32", 8, 64)
	prompt := []int{17, 230, 91, 4, 300}
	vocab := e.Manifest().Vocab

	s := newSession(t, e, engine.ModeHybrid)
	l, err := s.Prefill(prompt)
	if err != nil {
		t.Fatal(err)
	}
	pre := append([]float32(nil), l...)
	first := softmax(pre)
	exact := make([]float64, vocab)
	for t1, p1 := range first {
		l, err := s.Decode(t1)
		if err != nil {
			t.Fatal(err)
		}
		for y, p2 := range softmax(l) {
			exact[y] += p1 * p2
		}
		if err := s.Rewind(len(prompt)); err != nil {
			t.Fatal(err)
		}
	}

	target := newSession(t, e, engine.ModeHybrid)
	st := &decoding.MTP{DraftMax: 3, Adaptive: decoding.Adaptive{Off: true}}
	counts := make([]float64, vocab)
	var stats decoding.Stats
	for seed := range uint64(samples) {
		target.Reset()
		if _, err := target.Prefill(prompt); err != nil {
			t.Fatal(err)
		}
		smp := sample.New(sample.Params{Temperature: 1, Seed: seed})
		dec, err := st.Start(target, prompt, smp)
		if err != nil {
			t.Fatal(err)
		}
		t1 := smp.Sample(pre, nil)
		next, err := dec.Next(t1, []int{t1})
		if err != nil {
			t.Fatal(err)
		}
		counts[next[0]]++
		ds := dec.Stats()
		dec.Close()
		if ds.Note != "" {
			t.Fatalf("the strategy did not run: %s", ds.Note)
		}
		stats.Drafted += ds.Drafted
		stats.Accepted += ds.Accepted
	}
	if stats.Accepted == 0 || stats.Accepted == stats.Drafted {
		t.Fatalf("%d of %d drafts accepted: the test needs both acceptances and rejections", stats.Accepted, stats.Drafted)
	}
	expected := make([]float64, vocab)
	for i := range exact {
		expected[i] = exact[i] * samples
	}
	stat, df := testutil.ChiSquare(counts, expected)
	crit := testutil.ChiSquareCritical(df)
	t.Logf("chi-square %.1f, %d degrees of freedom, critical value %.1f at 0.001; %d/%d drafts accepted", stat, df, crit, stats.Accepted, stats.Drafted)
	if stat > crit {
		t.Errorf("speculative samples: chi-square %.1f > %.1f (df %d): not the target's distribution", stat, crit, df)
	}
}
