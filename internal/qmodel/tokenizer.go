package qmodel

import (
	"fmt"
	"github.com/aotlm/aotlm/internal/userfile"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/format/gguf"
	"github.com/aotlm/aotlm/internal/limits"
)

// hfTokenizerFiles are the files a Hugging Face folder keeps its tokenizer,
// chat template and generation defaults in.
var hfTokenizerFiles = []string{"tokenizer.json", "tokenizer.model", "tokenizer_config.json",
	"special_tokens_map.json", "added_tokens.json", "vocab.json", "merges.txt", "encoder.json",
	"vocab.bpe", "chat_template.jinja", "generation_config.json"}

// TokenizerGGUF is the vocabulary-only GGUF holding a GGUF source's tokenizer.
const TokenizerGGUF = "tokenizer.gguf"

// copyTokenizer copies the source's tokenizer into dir and returns the file
// name to record ("" for a set of HF files or none).
func copyTokenizer(ck format.Checkpoint, src, explicit, dir string) (string, error) {
	if explicit != "" {
		st, err := os.Stat(explicit)
		if err != nil {
			return "", fmt.Errorf("tokenizer: %w", err)
		}
		if st.IsDir() {
			return "", copyHF(explicit, dir)
		}
		name := filepath.Base(explicit)
		if strings.HasSuffix(name, ".bin") {
			name = "tokenizer.bin"
		}
		return name, copyFile(explicit, filepath.Join(dir, name))
	}
	switch f := ck.(type) {
	case *gguf.File:
		return writeGGUFVocab(f, filepath.Join(dir, TokenizerGGUF))
	}
	if st, err := os.Stat(src); err == nil {
		d := src
		if !st.IsDir() {
			d = filepath.Dir(src)
		}
		if ck.Format() == "safetensors" {
			return "", copyHF(d, dir)
		}
	}
	return "", nil
}

// writeGGUFVocab keeps the tokenizer.* metadata of a GGUF file (vocabulary,
// merges, special ids, chat template) as a GGUF file with no tensors.
func writeGGUFVocab(f *gguf.File, path string) (string, error) {
	var kv []gguf.KV
	for _, e := range f.KVs() {
		if strings.HasPrefix(e.Key, "tokenizer.") {
			kv = append(kv, e)
		}
	}
	if len(kv) == 0 {
		return "", nil
	}
	out, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := gguf.Write(out, kv, nil); err != nil {
		out.Close()
		return "", fmt.Errorf("tokenizer: %w", err)
	}
	return TokenizerGGUF, out.Close()
}

func copyHF(from, to string) error {
	for _, n := range hfTokenizerFiles {
		p := filepath.Join(from, n)
		if _, err := os.Stat(p); err != nil {
			continue
		}
		if err := copyFile(p, filepath.Join(to, n)); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string) error {
	in, _, err := userfile.Open(from, userfile.Tokenizer)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(in, limits.MaxTokenizerFile+1))
	if err != nil {
		out.Close()
		return fmt.Errorf("copying %s: %w", from, err)
	}
	if n > limits.MaxTokenizerFile {
		out.Close()
		return &limits.Error{What: "tokenizer file " + from, Limit: limits.Bytes(limits.MaxTokenizerFile)}
	}
	return out.Close()
}
