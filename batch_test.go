package aotlm_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aotlm/aotlm"
)

// batchPrompts are prompts of different lengths, so that the sessions
// decoding together sit at different positions.
var batchPrompts = []string{"Once upon a time", "Tom had a big red ball that he liked to throw", "The cat", "Lily and her mom went to the park to see the ducks"}

// generateTogether runs one greedy generation of maxTokens per prompt, each
// on its own session in its own goroutine; every generation waits after
// its first token until all have one, so that they decode together from
// then on. cancelAt[i] > 0 cancels generation i after that many tokens.
func generateTogether(t *testing.T, m *aotlm.Model, maxTokens int, cancelAt []int) []*aotlm.Result {
	t.Helper()
	var first, done sync.WaitGroup
	first.Add(len(batchPrompts))
	res := make([]*aotlm.Result, len(batchPrompts))
	errs := make([]error, len(batchPrompts))
	for i, p := range batchPrompts {
		s, err := m.NewSession(0)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done.Add(1)
		go func() {
			defer done.Done()
			n := 0
			res[i], errs[i] = s.Generate(ctx, aotlm.Request{Prompt: p, MaxTokens: maxTokens, IgnoreEOS: true}, func(aotlm.Token) error {
				if n++; n == 1 {
					first.Done()
					first.Wait()
				}
				if cancelAt != nil && n == cancelAt[i] {
					cancel()
				}
				return nil
			})
		}()
	}
	done.Wait()
	for i, err := range errs {
		if err != nil && !(cancelAt != nil && cancelAt[i] > 0 && errors.Is(err, context.Canceled)) {
			t.Fatalf("generation %d: %v", i, err)
		}
	}
	return res
}

// TestConcurrentSessionsShareDecodePasses: sessions that generate at the
// same time decode in shared passes, one row each (every pass after
// their first tokens holds all of them), and each generates the ids it
// generates alone; a generation cancelled midway leaves the passes after
// that, and the others go on unchanged. In hybrid and kv modes.
func TestConcurrentSessionsShareDecodePasses(t *testing.T) {
	defer aotlm.SetGatherTime(time.Minute)() // every pass waits for all the sessions
	const maxTokens = 40
	for _, mode := range []string{"hybrid", "kv"} {
		m := stories(t, mode)
		var want [][]int
		for _, p := range batchPrompts {
			s, err := m.NewSession(0)
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.Generate(context.Background(), aotlm.Request{Prompt: p, MaxTokens: maxTokens, IgnoreEOS: true}, nil)
			s.Close()
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, r.IDs)
		}
		before := m.DecodeStats()
		got := generateTogether(t, m, maxTokens, nil)
		for i, r := range got {
			if !slices.Equal(r.IDs, want[i]) {
				t.Errorf("%s: prompt %d: together %v, alone %v", mode, i, r.IDs, want[i])
			}
		}
		// the sessions decode maxTokens-1 times each (the last id is not fed)
		st := m.DecodeStats()
		n := int64(len(batchPrompts))
		if passes, rows := st.Passes-before.Passes, st.Rows-before.Rows; passes != maxTokens-1 || rows != n*(maxTokens-1) {
			t.Errorf("%s: %d passes of %d rows in all, want %d of %d rows each", mode, passes, rows, maxTokens-1, n)
		}

		// generation 2 is cancelled at its 10th token: 9 passes of four
		// rows, then 30 of three
		before = m.DecodeStats()
		got = generateTogether(t, m, maxTokens, []int{0, 0, 10, 0})
		for i, r := range got {
			if i == 2 {
				if r.StopReason != aotlm.StopCanceled || len(r.IDs) != 10 || !slices.Equal(r.IDs, want[i][:10]) {
					t.Errorf("%s: cancelled generation: stop %q, ids %v", mode, r.StopReason, r.IDs)
				}
				continue
			}
			if !slices.Equal(r.IDs, want[i]) {
				t.Errorf("%s: prompt %d beside a cancelled one: %v, alone %v", mode, i, r.IDs, want[i])
			}
		}
		st = m.DecodeStats()
		if passes, rows := st.Passes-before.Passes, st.Rows-before.Rows; passes != maxTokens-1 || rows != 9*n+30*(n-1) {
			t.Errorf("%s: with a cancel, %d passes of %d rows in all, want %d of %d", mode, passes, rows, maxTokens-1, 9*n+30*(n-1))
		}
	}
}
