package tokenizer

import (
	"fmt"
	"github.com/aotlm/aotlm/internal/userfile"
	"os"
	"path/filepath"
	"strings"
)

// LoadDir loads the tokenizer stored in a model directory. It looks, in
// this order, for:
//
//   - tokenizer.json (Hugging Face tokenizers);
//   - vocab.json + merges.txt, or encoder.json + vocab.bpe (GPT-2 layouts;
//     the pre-tokenizer is inferred as gpt2Family documents);
//   - tokenizer.model, either tiktoken text (Llama 3) or a SentencePiece
//     model.
//
// tokenizer_config.json beside them, when present, adds its
// added_tokens_decoder entries (GPT-2 layouts, tiktoken) and sets BOS/EOS
// from bos_token/eos_token and add_bos_token/add_eos_token.
func LoadDir(path string) (Tokenizer, error) {
	has := func(name string) bool {
		st, err := os.Stat(filepath.Join(path, name))
		return err == nil && !st.IsDir()
	}
	switch {
	case has("tokenizer.json"):
		return loadHFWithConfig(filepath.Join(path, "tokenizer.json"))
	case has("vocab.json") && has("merges.txt"):
		return loadGPT2Dir(path, "vocab.json", "merges.txt")
	case has("encoder.json") && has("vocab.bpe"):
		return loadGPT2Dir(path, "encoder.json", "vocab.bpe")
	case has("tokenizer.model"):
		return loadModelFile(filepath.Join(path, "tokenizer.model"))
	}
	return nil, fmt.Errorf("tokenizer: %s: no tokenizer.json, vocab.json+merges.txt, encoder.json+vocab.bpe or tokenizer.model", path)
}

// Load loads a tokenizer from one file: tokenizer.json (any *.json that is
// not a vocabulary), a *.model file (tiktoken or SentencePiece), or one of
// the GPT-2 layout files, whose partner is taken from the same directory.
// A directory is passed to LoadDir.
func Load(path string) (Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if st.IsDir() {
		return LoadDir(path)
	}
	dir, name := filepath.Split(path)
	switch name {
	case "vocab.json", "merges.txt":
		return loadGPT2Dir(dir, "vocab.json", "merges.txt")
	case "encoder.json", "vocab.bpe":
		return loadGPT2Dir(dir, "encoder.json", "vocab.bpe")
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return loadHFWithConfig(path)
	case ".model", ".tiktoken":
		return loadModelFile(path)
	}
	return nil, fmt.Errorf("tokenizer: %s: unknown tokenizer file type", path)
}

// loadHFWithConfig loads tokenizer.json and takes BOS/EOS from
// tokenizer_config.json beside it when the post-processor names none.
func loadHFWithConfig(path string) (*BPE, error) {
	b, err := LoadHF(path)
	if err != nil {
		return nil, err
	}
	cfg, err := readHFConfig(filepath.Join(filepath.Dir(path), "tokenizer_config.json"))
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		bos, eos := b.bos, b.eos
		cfg.applyIDs(b)
		if bos >= 0 {
			b.bos = bos
		}
		if eos >= 0 {
			b.eos = eos
		}
	}
	return b, nil
}

// loadModelFile tells tiktoken text from a SentencePiece protobuf.
func loadModelFile(path string) (Tokenizer, error) {
	f, _, err := userfile.Open(path, userfile.Tokenizer)
	if err != nil {
		return nil, err
	}
	head := make([]byte, 512)
	n, _ := f.Read(head)
	f.Close()
	if isTiktoken(head[:n]) {
		return LoadTiktoken(path, "")
	}
	return LoadSentencePiece(path)
}
