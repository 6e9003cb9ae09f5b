package arch

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/graph"
	"github.com/aotlm/aotlm/internal/testutil"
)

// checkArchFixture checks arch/<family> against its reference (llama.cpp's
// logits, or for a family llama.cpp cannot run an independent float64
// transcription of HF's code) from its HF folder and, when the fixture has
// one, from its GGUF within tol.
func checkArchFixture(t *testing.T, family string, tol float64) {
	t.Helper()
	paths := testutil.ArchModelPaths(t, family)
	for _, src := range []string{"hf", "gguf"} {
		if _, ok := paths[src]; !ok {
			continue
		}
		d := fixtureDiff(t, family, src == "gguf", nil)
		t.Logf("%s: max |logit diff| %.3g", src, d)
		if d > tol {
			t.Errorf("%s: logits differ from the reference by %.3g (tolerance %g)", src, d, tol)
		}
	}
}

// archSplitCase is one family's split prefill check for
// checkArchSplitPrefill.
type archSplitCase struct {
	family  string
	sources []string // fixture paths under the test data, each run
	chunks  []int    // chunk lengths run after the split at k
	tol     float64  // max |logit diff| from llama.cpp
	// alone is the least the second part of the split, run on a fresh
	// state, must miss the last row by; carrier names what carries it.
	alone   float64
	carrier string
}

// checkArchSplitPrefill feeds the reference tokens to the interpreter of
// each source in two calls (split_prefill's k), then in chunks of each of
// c.chunks, and checks every row and the last one against llama.cpp's
// one-call logits within c.tol; the second part alone, on a fresh state,
// must miss the last row by at least c.alone.
func checkArchSplitPrefill(t *testing.T, c archSplitCase) {
	t.Helper()
	ref := testutil.ReadArchReference(t, c.family)
	for _, src := range c.sources {
		m, err := Load(openFixture(t, src))
		if err != nil {
			t.Fatal(err)
		}
		g, err := Build(&m.Config, BuildOptions{AllLogits: true})
		if err != nil {
			t.Fatal(err)
		}
		in, err := graph.NewInterpreter(g, m.Weights, 2)
		if err != nil {
			t.Fatal(err)
		}
		V := m.Config.Vocab
		for _, chunk := range append([]int{ref.Split.K}, c.chunks...) {
			st := in.NewState(len(ref.Tokens))
			var d float64
			for lo := 0; lo < len(ref.Tokens); {
				hi := min(lo+chunk, len(ref.Tokens))
				if chunk == ref.Split.K {
					hi = len(ref.Tokens)
					if lo == 0 {
						hi = ref.Split.K
					}
				}
				out, rows, err := in.Run(st, ref.Tokens[lo:hi])
				if err != nil {
					t.Fatal(err)
				}
				for r := range rows {
					for j, want := range ref.Logits[lo+r] {
						d = math.Max(d, math.Abs(float64(out[r*V+j]-want)))
					}
				}
				if hi == len(ref.Tokens) {
					for j, want := range ref.Split.Last {
						d = math.Max(d, math.Abs(float64(out[(rows-1)*V+j]-want)))
					}
				}
				lo = hi
			}
			t.Logf("%s, chunks of %d: max |logit diff| %.3g", src, chunk, d)
			if d > c.tol {
				t.Errorf("%s, chunks of %d: logits differ from llama.cpp by %.3g", src, chunk, d)
			}
		}
		out, rows, err := in.Run(in.NewState(len(ref.Tokens)), ref.Tokens[ref.Split.K:])
		if err != nil {
			t.Fatal(err)
		}
		var d float64
		for j, want := range ref.Split.Last {
			d = math.Max(d, math.Abs(float64(out[(rows-1)*V+j]-want)))
		}
		t.Logf("%s, second part alone: last row differs by %.3g", src, d)
		if d < c.alone {
			t.Errorf("%s: the second part alone gives the last logits within %.3g: the %s is not what carries them", src, d, c.carrier)
		}
	}
}

// archKeyRefusal is a change to a fixture's metadata that must be refused
// with an error naming want.
type archKeyRefusal struct {
	want string
	mut  func(m map[string]any)
}

// checkArchHFRefusals applies each refusal to arch/<family>'s config.json
// and checks that reading it, then check, fails naming the key.
func checkArchHFRefusals(t *testing.T, family string, check func(c *Config) error, refusals []archKeyRefusal) {
	t.Helper()
	f := familyNamed(t, family)
	for _, r := range refusals {
		m := fixtureConfig(t, family)
		r.mut(m)
		c, err := f.configHF(m)
		if err == nil {
			err = check(&c)
		}
		if err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("got %v, want an error naming %s", err, r.want)
		}
	}
}

// checkArchGGUFRefusals applies each refusal to a copy of
// arch/<family>/model.gguf's metadata and checks that read, then
// validation, fails naming the key.
func checkArchGGUFRefusals(t *testing.T, family string, read func(m map[string]any, arch string) (Config, error), refusals []archKeyRefusal) {
	t.Helper()
	meta := ggufFixtureMetadata(t, family)
	for _, r := range refusals {
		m := meta()
		r.mut(m)
		cfg, err := read(m, family)
		if err == nil {
			cfg.Vocab = 384 // ConfigOf takes it from token_embd.weight
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), r.want) {
			t.Errorf("got %v, want an error naming %s", err, r.want)
		}
	}
}

// ggufFixtureMetadata returns a function giving a fresh copy of
// arch/<family>/model.gguf's metadata.
func ggufFixtureMetadata(t *testing.T, family string) func() map[string]any {
	t.Helper()
	ck := openFixture(t, "arch/"+family+"/model.gguf")
	return func() map[string]any {
		m := map[string]any{}
		for k, v := range ck.Metadata() {
			m[k] = v
		}
		return m
	}
}

// ggufFixtureConfig reads the config of arch/<family>/model.gguf.
func ggufFixtureConfig(t *testing.T, family string) Config {
	t.Helper()
	c, _, err := ConfigOf(openFixture(t, "arch/"+family+"/model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fuzzArchConfig feeds config.json documents (arch/<family>'s and seeds)
// to read; a config that reads, validates and is not too big must build
// without panicking.
func fuzzArchConfig(f *testing.F, family string, read func(m map[string]any) (Config, error), tooBig func(c *Config) bool, seeds ...string) {
	f.Add(testutil.ReadFile(f, "arch/"+family+"/config.json"))
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]any
		if json.Unmarshal(data, &m) != nil {
			return
		}
		c, err := read(m)
		if err != nil || c.Validate() != nil {
			return
		}
		if tooBig(&c) {
			return // valid but too large to build cheaply
		}
		if _, err := Build(&c, BuildOptions{}); err != nil {
			t.Fatalf("a valid config does not build: %v", err)
		}
	})
}
