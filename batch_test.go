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

// TestSlowSessionDoesNotHoldBackOthers: a session that stops asking for
// tokens (its caller blocked in onToken, as a server's writing to a client
// that does not read) stays a member of the shared passes, yet another
// session generating at the same time runs to its end without it: a pass
// waits for a missing session only for a bounded time.
func TestSlowSessionDoesNotHoldBackOthers(t *testing.T) {
	defer aotlm.SetGatherTime(time.Millisecond)()
	m := stories(t, "hybrid")
	slow, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	fast, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer fast.Close()
	blocked, release := make(chan struct{}), make(chan struct{})
	slowDone := make(chan error, 1)
	go func() {
		n := 0
		_, err := slow.Generate(context.Background(), aotlm.Request{Prompt: "Once upon a time", MaxTokens: 8, IgnoreEOS: true}, func(aotlm.Token) error {
			if n++; n == 3 {
				close(blocked)
				<-release
			}
			return nil
		})
		slowDone <- err
	}()
	<-blocked // slow is a member that asks for nothing until released
	before := m.DecodeStats()
	fastDone := make(chan *aotlm.Result, 1)
	go func() {
		r, err := fast.Generate(context.Background(), aotlm.Request{Prompt: "Tom had a red ball", MaxTokens: 30, IgnoreEOS: true}, nil)
		if err != nil {
			t.Error(err)
		}
		fastDone <- r
	}()
	select {
	case r := <-fastDone:
		if r == nil || len(r.IDs) != 30 {
			t.Errorf("the other session generated %v", r)
		}
	case <-time.After(time.Minute):
		t.Fatal("a session blocked between tokens held back another session's generation")
	}
	if st := m.DecodeStats(); st.Rows-before.Rows != 29 {
		t.Errorf("the other session's %d decode passes advanced %d rows, want 29", st.Passes-before.Passes, st.Rows-before.Rows)
	}
	close(release)
	if err := <-slowDone; err != nil {
		t.Fatal(err)
	}
}
