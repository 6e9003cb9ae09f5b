package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/testutil"
)

type runDecodingJSON struct {
	IDs      []int `json:"ids"`
	Decoding *struct {
		Strategy      string  `json:"strategy"`
		TokensPerPass float64 `json:"tokens_per_pass"`
		Verify        int     `json:"verify_passes"`
	} `json:"decoding"`
}

// TestRunStrategies: compile --lookahead adds the plan of a lookahead
// pass; run --mode lookahead, --mode lookup and --draft give the ids of
// plain greedy decoding and report their passes in --json; bad
// combinations and a draft of another vocabulary are refused.
func TestRunStrategies(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	art := filepath.Join(t.TempDir(), "s.aot")
	if code, _, stderr := runCLI(t, "compile", src, "-o", art, "--ar-len", "8", "--lookahead", "3,5,3", "--ctx", "256"); code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	m, err := aotlm.Open(art, aotlm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	lens := m.Info().ARLens
	m.Close()
	if !slices.Contains(lens, 16) {
		t.Fatalf("plans %v: --lookahead 3,5,3 (16 rows) added no AR-16 plan", lens)
	}
	run := func(extra ...string) runDecodingJSON {
		t.Helper()
		args := append([]string{"run", "-m", art, "-p", "Tom had a red ball. Tom had a red ball. Tom had", "-n", "48", "--temp", "0", "--json", "-t", "1"}, extra...)
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", extra, code, stderr)
		}
		var r runDecodingJSON
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	want := run()
	for _, extra := range [][]string{{"--mode", "lookahead"}, {"--mode", "lookup"}, {"--draft", art}} {
		got := run(append(extra, "--no-adapt")...)
		if !slices.Equal(got.IDs, want.IDs) {
			t.Fatalf("%v: ids %v, want plain decoding's %v", extra, got.IDs, want.IDs)
		}
		if got.Decoding == nil || got.Decoding.Verify == 0 || got.Decoding.TokensPerPass < 1 {
			t.Fatalf("%v: report %+v", extra, got.Decoding)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-m", art, "-p", "x", "--mode", "lookup", "--draft", art}, "choose one"},
		{[]string{"run", "-m", art, "-p", "x", "--mode", "lookahead", "--ngram", "1"}, "n-gram"},
		{[]string{"run", "-m", art, "-p", "x", "--draft", testutil.Path(t, "arch/llama")}, "tokenizer"},
		{[]string{"compile", src, "-o", filepath.Join(t.TempDir(), "x.aot"), "--lookahead", "3,5"}, "N,W,G"},
	} {
		code, _, stderr := runCLI(t, c.args...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q: want exit 1 naming %q", c.args, code, stderr, c.want)
		}
	}
}

// TestRunDraftMTP: run --draft mtp on the qwen35 fixture's GGUF (compiled
// into the cache with its draft head) gives plain greedy decoding's ids
// and reports verify passes and tokens per pass; a model without a head
// is refused by name.
func TestRunDraftMTP(t *testing.T) {
	t.Setenv("AOTLM_CACHE", t.TempDir())
	src := testutil.Path(t, "arch/qwen35/model.gguf")
	run := func(extra ...string) runDecodingJSON {
		t.Helper()
		args := append([]string{"run", "-m", src, "-p", "a b c a b c a b c", "-n", "24", "--temp", "0", "--json", "-t", "1", "--ctx", "128"}, extra...)
		code, stdout, stderr := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", extra, code, stderr)
		}
		var r runDecodingJSON
		if err := json.Unmarshal([]byte(stdout), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	want := run()
	got := run("--draft", "mtp", "--no-adapt")
	if !slices.Equal(got.IDs, want.IDs) {
		t.Fatalf("ids %v, want plain decoding's %v", got.IDs, want.IDs)
	}
	if got.Decoding == nil || got.Decoding.Strategy != "mtp" || got.Decoding.Verify == 0 || got.Decoding.TokensPerPass < 1 {
		t.Fatalf("report %+v", got.Decoding)
	}
	stories := testutil.Path(t, "models/stories260K/stories260K.gguf")
	code, _, stderr := runCLI(t, "run", "-m", stories, "-p", "x", "-n", "4", "--draft", "mtp")
	if code != 1 || !strings.Contains(stderr, "multi-token-prediction") {
		t.Errorf("stories260K with --draft mtp: exit %d, %q", code, stderr)
	}
}
