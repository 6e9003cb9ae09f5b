package main

import (
	"fmt"
	"io"
	"os"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/model"
	"github.com/aotlm/aotlm/internal/modelparts"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// openOptions says how openModel opens a model.
type openOptions struct {
	Tokenizer string // a tokenizer file or folder replacing the model's
	Threads   int
	Mode      string // "hybrid" or "kv"
	HugePages bool   // read the artifact into huge pages (aotlm.Options)
	// NoCompile runs a checkpoint through the graph interpreter instead of
	// compiling it into the cache.
	NoCompile bool
	Compile   compile.Options // for the compile cache
	Log       io.Writer       // the cache's "compiling" line, or nil
}

// openModel opens MODEL as the runtime sees it: an artifact directly, a
// checkpoint compiled into the cache first (or through the interpreter
// with NoCompile).
func openModel(path string, o openOptions) (*aotlm.Model, error) {
	if err := checkModelPath(path); err != nil {
		return nil, err
	}
	if o.NoCompile && !artifact.IsArtifact(path) {
		m, err := model.Open(path, model.Options{Tokenizer: o.Tokenizer, Threads: o.Threads})
		if err != nil {
			return nil, err
		}
		return m.Runtime()
	}
	runPath := path
	if !artifact.IsArtifact(path) {
		o.Compile.Tokenizer = o.Tokenizer
		compiled, err := compile.Cached(path, o.Compile, o.Log)
		if err != nil {
			return nil, err
		}
		runPath = compiled
	}
	m, err := aotlm.Open(runPath, aotlm.Options{Threads: o.Threads, Mode: o.Mode, HugePages: o.HugePages})
	if err != nil {
		return nil, err
	}
	var tok tokenizer.Tokenizer
	switch {
	case o.Tokenizer != "" && runPath == path:
		tok, err = model.OpenTokenizer(o.Tokenizer, m.Info().Vocab)
	case m.Tokenizer() == nil && runPath != path:
		// artifacts store tokenizer.json, SentencePiece, llama2.c and GGUF
		// vocabularies; a folder's other layouts load from it
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

// checkModelPath refuses a model path that is missing or is neither a
// regular file nor a folder (a FIFO or a device would block or never end).
func checkModelPath(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if !st.IsDir() && !st.Mode().IsRegular() {
		return fmt.Errorf("model %s is not a regular file or a folder", path)
	}
	return nil
}
