package score

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/eval"
	"github.com/aotlm/aotlm/internal/load"
)

// KVNames are the KV cache storages a model can be compiled with and
// scored in (compile.Options.KV).
var KVNames = []string{"f32", "f16", "u8", "q4", "q4v"}

// ParseKV reads a ppl --kv list: names of KVNames, each once.
func ParseKV(v string) ([]string, error) {
	var out []string
	for _, k := range strings.Split(v, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(KVNames, k) {
			return nil, fmt.Errorf("--kv: unknown KV cache storage %q (want %s)", k, strings.Join(KVNames, ", "))
		}
		if slices.Contains(out, k) {
			return nil, fmt.Errorf("--kv: %s given twice", k)
		}
		out = append(out, k)
	}
	return out, nil
}

// KVOptions say which checkpoint to score with which KV caches.
type KVOptions struct {
	// Model is a checkpoint or quantized folder compile reads (not an
	// artifact: its cache storage is fixed).
	Model     string
	Tokenizer string
	// KV lists the cache storages; the first is the reference of the
	// others' KL divergence and top-1 agreement.
	KV      []string
	Ctx     int
	Threads int
}

// KVPhases compiles o.Model once per cache storage of o.KV (as `aotlm
// compile --kv` does, for o.Ctx positions, into temporary files removed
// after) and scores text with each, chunk by chunk as to says: the same
// weights, so the KL divergence against the first is the error the cache
// adds.
func KVPhases(o KVOptions, text string, to TextOptions) ([]eval.PhaseResult, error) {
	if len(o.KV) == 0 {
		return nil, fmt.Errorf("--kv: no KV cache storage given")
	}
	if artifact.IsArtifact(o.Model) {
		return nil, fmt.Errorf("--kv needs a checkpoint or quantized folder to compile, not the artifact %s (its cache storage is fixed)", o.Model)
	}
	opts := to.eval()
	tmp, err := os.MkdirTemp("", "aotlm-ppl-kv-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	var sessions []eval.Session
	for _, kv := range o.KV {
		path := filepath.Join(tmp, kv+".aot")
		co := compile.Options{ARLens: []int{load.ARLen}, Ctx: o.Ctx, KV: kv, Tokenizer: o.Tokenizer}
		if err := compile.CompileFile(o.Model, path, co); err != nil {
			return nil, fmt.Errorf("--kv %s: %w", kv, err)
		}
		s, done, err := artifactSession(path, o.Ctx, o.Threads)
		if err != nil {
			return nil, fmt.Errorf("--kv %s: %w", kv, err)
		}
		defer done()
		sessions = append(sessions, s)
	}
	tokSrc := o.Tokenizer
	if tokSrc == "" {
		tokSrc = o.Model
	}
	tok, err := load.Tokenizer(tokSrc, o.Model)
	if err != nil {
		return nil, err
	}
	ids, bos, err := eval.Tokenize(tok, text)
	if err != nil {
		return nil, err
	}
	opts.BOS = bos
	return eval.PerplexityPhases(sessions, ids, opts)
}
