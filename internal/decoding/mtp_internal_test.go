package decoding

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/engine"
	"github.com/aotlm/aotlm/internal/sample"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestMTPHeadRows checks every row the mtp decoder gives its head, also
// after rounds whose drafts were kept (sampling at temperature 1, where
// the fixture's head is often right): the row of target position j must
// hold the token at j+1 and the target's hidden row at j, as a plain pass
// over the final sequence computes them.
func TestMTPHeadRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.aot")
	if err := compile.CompileFile(testutil.Path(t, "arch/qwen35/model.gguf"), path, compile.Options{ARLens: []int{8}, Ctx: 96}); err != nil {
		t.Fatal(err)
	}
	e, err := engine.OpenWith(path, engine.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	prompt := []int{17, 230, 91, 4, 300, 122, 45, 9, 260, 31, 77}
	type headRow struct {
		j, tok int
		h      []float32
	}
	for seed := range uint64(4) {
		target, err := e.NewSession(engine.SessionOptions{Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer target.Close()
		first, err := target.PrefillContext(context.Background(), prompt)
		if err != nil {
			t.Fatal(err)
		}
		smp := sample.New(sample.Params{Temperature: 1, Seed: seed})
		dec, err := (&MTP{DraftMax: 4, Adaptive: Adaptive{Off: true}}).Start(target, prompt, smp)
		if err != nil {
			t.Fatal(err)
		}
		d, ok := dec.(*mtpDecoder)
		if !ok {
			t.Fatalf("a plain decoder: %+v", dec.Stats())
		}
		// the rows waiting for the head before each step, and the row of
		// the newest position with the token the step feeds (a row left
		// waiting by a plain step is seen again, the same)
		var rows []headRow
		record := func(id int) {
			for i, tok := range d.pendTok {
				rows = append(rows, headRow{d.base + d.head.Pos() + i, tok, append([]float32(nil), d.pendH[i*d.width:(i+1)*d.width]...)})
			}
			rows = append(rows, headRow{target.Pos() - 1, id, append([]float32(nil), d.last...)})
		}
		out := []int{smp.Sample(first, nil)}
		for len(out) < 40 {
			record(out[len(out)-1])
			next, err := dec.Next(out[len(out)-1], out)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, next...)
		}
		record(out[len(out)-1])
		st := dec.Stats()
		dec.Close()
		if st.Accepted == 0 {
			t.Fatalf("seed %d: no draft kept (%v): the test needs kept drafts", seed, st)
		}
		if st.TokensPerPass() <= 1 || st.Tokens != st.Passes+st.Accepted {
			t.Errorf("seed %d: %d drafts kept, %d tokens over %d passes (%.2f a pass)", seed, st.Accepted, st.Tokens, st.Passes, st.TokensPerPass())
		}

		// the target's hidden rows of the final sequence, one position a pass
		seq := append(append([]int(nil), prompt...), out...)
		ref, err := e.NewSession(engine.SessionOptions{Mode: engine.ModeKV, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer ref.Close()
		hidden := make([][]float32, 0, len(seq))
		for j, id := range seq[:len(seq)-1] {
			if _, err := ref.Decode(id); err != nil {
				t.Fatal(err)
			}
			hidden = append(hidden, append([]float32(nil), ref.Hidden(j)...))
		}
		seen := map[int]bool{}
		for _, r := range rows {
			seen[r.j] = true
			if r.tok != seq[r.j+1] {
				t.Fatalf("seed %d: the head's row of position %d has token %d, the sequence %d", seed, r.j, r.tok, seq[r.j+1])
			}
			var diff float64
			for i, v := range r.h {
				diff = max(diff, math.Abs(float64(v-hidden[r.j][i])))
			}
			if diff > 1e-3 {
				t.Fatalf("seed %d: the head's row of position %d is %.3g from the target's hidden row", seed, r.j, diff)
			}
		}
		for j := d.base; j < len(prompt)+len(out)-1; j++ {
			if !seen[j] {
				t.Fatalf("seed %d: position %d never reached the head", seed, j)
			}
		}
		t.Logf("seed %d: %d head rows checked; %v", seed, len(rows), st)
	}
}
