package load

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/kernel"
	"github.com/aotlm/aotlm/internal/model"
	"github.com/aotlm/aotlm/internal/modelparts"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// Options says how Open opens a model.
type Options struct {
	Tokenizer string // a tokenizer file or folder replacing the model's
	Threads   int
	Mode      string // "hybrid" or "kv"
	HugePages bool   // read the artifact into huge pages (aotlm.Options)
	// StateBudget bounds each session's state snapshots in bytes
	// (aotlm.Options; 0: the default).
	StateBudget int64
	// NoCompile runs a checkpoint through the graph interpreter instead of
	// compiling it into the cache.
	NoCompile bool
	// Context is the sessions' cache positions (aotlm.Options.Context): 0
	// the compiled context; more than an artifact was compiled for extends
	// it, up to the model's trained context.
	Context int
	Compile compile.Options // for the compile cache
	Log     io.Writer       // the cache's "compiling" line, or nil
}

// openArtifact opens a compiled artifact; the tests count its calls.
var openArtifact = aotlm.Open

// Open opens the model at path as the runtime sees it: an artifact
// directly, a checkpoint compiled into the cache first (or through the
// interpreter with NoCompile). A tokenizer the artifact lacks is taken
// from a checkpoint folder, and o.Tokenizer replaces the artifact's.
func Open(path string, o Options) (*aotlm.Model, error) {
	if err := CheckPath(path); err != nil {
		return nil, err
	}
	isArtifact := artifact.IsArtifact(path)
	if o.NoCompile && !isArtifact {
		m, err := model.Open(path, model.Options{Tokenizer: o.Tokenizer, Threads: o.Threads})
		if err != nil {
			return nil, err
		}
		return m.Runtime()
	}
	ao := aotlm.Options{Threads: o.Threads, Mode: o.Mode, HugePages: o.HugePages, StateBudget: o.StateBudget, Context: o.Context}
	var m *aotlm.Model
	var err error
	if isArtifact {
		m, err = openArtifact(path, ao)
	} else {
		copts := o.Compile
		copts.Tokenizer = o.Tokenizer
		m, err = openCached(path, copts, ao, o.Log)
	}
	if err != nil {
		return nil, err
	}
	var tok tokenizer.Tokenizer
	switch {
	case o.Tokenizer != "" && isArtifact:
		tok, err = model.OpenTokenizer(o.Tokenizer, m.Info().Vocab)
	case m.Tokenizer() == nil && !isArtifact:
		// artifacts store tokenizer.json, SentencePiece, llama2.c, GGUF
		// and GPT-2 layout vocabularies; a folder's other layouts (an
		// incomplete one: LoadDir names what it lacks) load from it
		if st, serr := os.Stat(path); serr == nil && st.IsDir() {
			tok, err = tokenizer.LoadDir(path)
		}
	}
	if err != nil {
		m.Close()
		return nil, err
	}
	if tok != nil {
		m.SetTokenizer(modelparts.PublicTokenizer(tok).(aotlm.Tokenizer))
	}
	return m, nil
}

// openCached opens the cache's artifact of the checkpoint at path,
// compiling it first when the cache has none or has one that no longer
// opens (truncated, damaged, of another format version).
func openCached(path string, copts compile.Options, ao aotlm.Options, log io.Writer) (*aotlm.Model, error) {
	copts = withDefaultKV(copts)
	out, err := compile.CachePath(path, copts)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(out); err == nil {
		m, err := openArtifact(out, ao)
		if err == nil || !stale(err) {
			return m, err
		}
		if err := compile.Evict(out, err, log); err != nil {
			return nil, err
		}
	}
	if err := compile.CompileInto(path, out, copts, log); err != nil {
		return nil, err
	}
	if err := Tune(); err != nil {
		return nil, err
	}
	return openArtifact(out, ao)
}

// withDefaultKV spells out the KV cache storage an empty KV compiles
// with, so that both name one cached artifact.
func withDefaultKV(o compile.Options) compile.Options {
	if o.KV == "" {
		o.KV = KV
	}
	return o
}

// stale tells whether err says a cached artifact is one to compile again:
// its file is damaged, of a format version this build does not read, or
// needs CPU features this machine lacks (a cache folder shared with
// another machine).
func stale(err error) bool {
	var fe *artifact.FormatError
	var ve *artifact.VersionError
	var ce *artifact.CPUFeatureError
	return errors.As(err, &fe) || errors.As(err, &ve) || errors.As(err, &ce)
}

// Tune picks the kernels' walk for this CPU once per machine (a short
// timed probe, its choice stored beside the compile cache), as a compile
// into the cache does: opening a model only reads the stored choice.
func Tune() error {
	// the error names the bad $AOTLM_KERNEL_TUNE value already
	_, err := kernel.TuneOnce()
	return err
}

// Cached returns a compiled artifact of the model at path: an artifact
// as it is, else the model compiled into the cache (once) with opts, the
// kernels tuned as Open's compile does. log receives the cache's
// "compiling" line, or nil.
func Cached(path string, opts compile.Options, log io.Writer) (string, error) {
	if artifact.IsArtifact(path) {
		return path, nil
	}
	out, err := compile.Cached(path, withDefaultKV(opts), log)
	if err != nil {
		return "", err
	}
	return out, Tune()
}

// Verify checks every checksum of the artifact at path, the weights'
// included (reading every byte).
func Verify(path string) error {
	a, err := artifact.Open(path, artifact.OpenOptions{Verify: true})
	if err != nil {
		return err
	}
	a.Close()
	return nil
}

// CheckPath refuses a model path that is missing or is neither a regular
// file nor a folder (a FIFO or a device would block or never end).
func CheckPath(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if !st.IsDir() && !st.Mode().IsRegular() {
		return fmt.Errorf("model %s is not a regular file or a folder", path)
	}
	return nil
}
