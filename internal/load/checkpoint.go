package load

import (
	"fmt"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/arch"
	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/model"
	"github.com/aotlm/aotlm/internal/modelparts"
	"github.com/aotlm/aotlm/internal/qmodel"
	"github.com/aotlm/aotlm/internal/tokenizer"
)

// Float reads a checkpoint's config and float32 weights: a quantized
// folder's dequantized, any other checkpoint's as stored.
func Float(path string) (*arch.Model, error) {
	if qmodel.IsDir(path) {
		m, _, err := qmodel.Load(path)
		return m, err
	}
	ck, err := detect.Open(path)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	m, err := arch.Load(ck)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Tokenizer opens the tokenizer at path (a tokenizer file, or a model);
// modelPath names the model in the error when there is none.
func Tokenizer(path, modelPath string) (tokenizer.Tokenizer, error) {
	tok, err := model.OpenTokenizer(path, 0)
	if err != nil {
		return nil, err
	}
	if tok == nil {
		return nil, fmt.Errorf("%s has no tokenizer: pass --tokenizer <file>", modelPath)
	}
	return tok, nil
}

// TokenizerOf opens the tokenizer of a path: an artifact's stored one, a
// tokenizer file or folder, or a model's (nil if it has none).
func TokenizerOf(path string) (tokenizer.Tokenizer, error) {
	if err := CheckPath(path); err != nil {
		return nil, err
	}
	if artifact.IsArtifact(path) {
		m, err := aotlm.Open(path, aotlm.Options{Threads: 1})
		if err != nil {
			return nil, err
		}
		defer m.Close()
		if m.Tokenizer() == nil {
			return nil, fmt.Errorf("%s: %w (the artifact stores none)", path, aotlm.ErrNoTokenizer)
		}
		return modelparts.Tokenizer(m), nil
	}
	return model.OpenTokenizer(path, 0)
}

// Tokenize encodes text with the tokenizer of path (TokenizerOf) and
// returns the ids and each id's token. bos puts the beginning-of-sequence
// token first (where the tokenizer has one); parseSpecial reads special
// tokens written in the text as themselves.
func Tokenize(path, text string, bos, parseSpecial bool) ([]int, []string, error) {
	tok, err := TokenizerOf(path)
	if err != nil {
		return nil, nil, err
	}
	if tok == nil {
		return nil, nil, fmt.Errorf("%s: %w", path, aotlm.ErrNoTokenizer)
	}
	ids, err := tokenizer.EncodeChecked(tok, text, tokenizer.EncodeOptions{AddSpecial: bos, ParseSpecial: parseSpecial})
	if err != nil {
		return nil, nil, err
	}
	if bos && tok.BOS() >= 0 && (len(ids) == 0 || ids[0] != tok.BOS()) {
		ids = append([]int{tok.BOS()}, ids...)
	}
	tokens := make([]string, len(ids))
	for i, id := range ids {
		tokens[i] = tok.Token(id)
	}
	return ids, tokens, nil
}
