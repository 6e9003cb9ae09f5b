package aotlm_test

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/aotlm/aotlm"
)

// TestSessionSaveLoad saves a session after a generation and loads it
// into a new session of another model handle (as a restarted process
// would): the continuation prefills only the new prompt tokens and
// generates what the saved session generates; damaged data is refused and
// leaves the session empty.
func TestSessionSaveLoad(t *testing.T) {
	m := stories(t, "hybrid")
	a, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	greedy := aotlm.Sampling{Temperature: 0, TopP: 1}
	first, err := a.Generate(context.Background(), aotlm.Request{Prompt: "Once upon a time", MaxTokens: 40, Sampling: greedy}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := a.SaveState(&buf); err != nil {
		t.Fatal(err)
	}
	saved := buf.Bytes()
	held := slices.Clone(a.History())

	m2 := stories(t, "hybrid")
	b, err := m2.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.LoadState(bytes.NewReader(saved)); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b.History(), held) {
		t.Fatalf("loaded history of %d ids, saved %d", len(b.History()), len(held))
	}
	next := append(slices.Clone(held), m.EndOfTurnIDs()...)
	next = append(next, first.IDs[:2]...)
	ra, err := a.Generate(context.Background(), aotlm.Request{IDs: next, MaxTokens: 20, Sampling: greedy}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.Generate(context.Background(), aotlm.Request{IDs: next, MaxTokens: 20, Sampling: greedy}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rb.Reused != len(held) || rb.Reused != ra.Reused {
		t.Errorf("after the load %d prompt tokens were reused (the saved session reuses %d); want the %d held", rb.Reused, ra.Reused, len(held))
	}
	if !slices.Equal(ra.IDs, rb.IDs) {
		t.Errorf("the loaded session generates %v, the saved one %v", rb.IDs, ra.IDs)
	}
	for name, bad := range map[string][]byte{"cut": saved[:len(saved)/2], "header only": saved[:20], "junk": []byte("AOTLMSES\xff\xff\xff\xff")} {
		if err := b.LoadState(bytes.NewReader(bad)); err == nil {
			t.Errorf("%s data: loaded", name)
		}
		if len(b.History()) != 0 {
			t.Errorf("%s data: the session holds %d ids after the refusal", name, len(b.History()))
		}
	}
}
