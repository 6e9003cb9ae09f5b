package strategies

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/load"
	"github.com/aotlm/aotlm/internal/testutil"
)

func TestReadPrompts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "prompts.txt")
	if err := os.WriteFile(path, []byte("Once upon a time\n\n  a\\nb  \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPrompts(path)
	if err != nil || len(got) != 2 || got[0] != "Once upon a time" || got[1] != "a\nb" {
		t.Fatalf("ReadPrompts = %q, %v", got, err)
	}
	empty := filepath.Join(dir, "empty.txt")
	if err := os.WriteFile(empty, []byte("\n \n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPrompts(empty); err == nil || !strings.Contains(err.Error(), "holds no prompt") {
		t.Fatalf("empty file: %v", err)
	}
	if _, err := ReadPrompts(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing file gave no error")
	}
}

// TestCompareLookup: prompt lookup against plain decoding of the stories
// model gives one row per prompt with both rates, the passes' figures,
// and a table naming the strategy.
func TestCompareLookup(t *testing.T) {
	t.Setenv(compile.CacheEnv, t.TempDir())
	t.Setenv(kernel.TuneEnv, "off")
	copts := load.CompileDefaults()
	copts.ARLens, copts.Ctx = []int{4}, 64
	m, err := load.Open(testutil.Path(t, "models/stories260K/stories260K.gguf"), load.Options{Threads: 1, Compile: copts})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := aotlm.PromptLookup(aotlm.LookupOptions{NgramMax: 3, NgramMin: 1, DraftMax: 8, DraftMin: 1, Adapt: aotlm.Adapt{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Compare(context.Background(), s, st, []string{"Once upon a time", "The cat sat"}, 16, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Tokens != 16 || len(rep.Rows) != 2 || rep.Strategy != st.Name() {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range rep.Rows {
		if r.PlainTokS <= 0 || r.TokS <= 0 || r.Speedup <= 0 || r.TokensPerPass < 1 || len(r.ids) != 16 {
			t.Fatalf("row %+v", r)
		}
	}
	var b bytes.Buffer
	if err := rep.Write(&b); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(b.String()), "\n"); len(lines) != 3 || !strings.Contains(lines[0], st.Name()+" tok/s") {
		t.Fatalf("table:\n%s", b.String())
	}
}
