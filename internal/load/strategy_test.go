package load

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
)

func TestStrategy(t *testing.T) {
	dir := tinyCheckpoint(t)
	m, err := Open(dir, Options{Threads: 1, Compile: CompileDefaults()})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if st, dm, err := Strategy(m, StrategyOptions{}); st != nil || dm != nil || err != nil {
		t.Fatalf("no strategy: %v %v %v", st, dm, err)
	}
	st, dm, err := Strategy(m, StrategyOptions{Lookahead: &aotlm.LookaheadOptions{N: 3, W: 5, G: 3}})
	if err != nil || st == nil || dm != nil {
		t.Fatalf("lookahead: %v %v %v", st, dm, err)
	}
	_, _, err = Strategy(m, StrategyOptions{Lookup: &aotlm.LookupOptions{NgramMax: 3, NgramMin: 1, DraftMax: 8, DraftMin: 1},
		Corpus: filepath.Join(t.TempDir(), "missing.txt")})
	if err == nil || !strings.HasPrefix(err.Error(), "lookup corpus: ") {
		t.Fatalf("missing corpus: %v", err)
	}
	// the model drafts for itself: the draft's context is what both hold
	st, dm, err = Strategy(m, StrategyOptions{Draft: dir, Threads: 1, Ctx: 1 << 30,
		DraftOptions: aotlm.DraftOptions{DraftMax: 4, DraftMin: 1, PMin: 0.5}})
	if err != nil || st == nil || dm == nil {
		t.Fatalf("draft: %v %v %v", st, dm, err)
	}
	dm.Close()
	if _, _, err := Strategy(m, StrategyOptions{Draft: filepath.Join(t.TempDir(), "none"), Threads: 1, Ctx: 64}); err == nil ||
		!strings.HasPrefix(err.Error(), "draft model: ") {
		t.Fatalf("missing draft model: %v", err)
	}
}
