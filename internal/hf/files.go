// Package hf finds what sits beside a checkpoint, in one place for the
// compiler and the runtime alike: its tokenizer (embedded in a GGUF file,
// a Hugging Face folder's tokenizer files, a llama2.c tokenizer.bin), its
// chat template (tokenizer_config.json, chat_template.jinja, a GGUF key)
// and its generation defaults (generation_config.json).
package hf

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/aotlm/aotlm/internal/gendefaults"
	"os"
	"path/filepath"
	"strings"

	"github.com/aotlm/aotlm/internal/chat"
	"github.com/aotlm/aotlm/internal/format"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/tokenizer"
	"github.com/aotlm/aotlm/internal/userfile"
)

// Files is what a checkpoint brings besides its config and weights.
type Files struct {
	// Tokenizer is the tokenizer as stored (one file, or a GPT-2
	// layout's files); nil when there is none, or when the folder holds
	// tokenizer files of no complete layout (then TokenizerDir names the
	// folder, and tokenizer.LoadDir says what it lacks).
	Tokenizer    *tokenizer.Stored
	TokenizerDir string
	// ChatTemplate is the Jinja source of the chat template, "" if none;
	// Specials the text of its BOS and EOS tokens where the files say.
	ChatTemplate string
	Specials     chat.Specials
	// Generation holds the generation defaults the runtime uses.
	Generation map[string]any
}

// generationKeys are the generation_config.json fields kept.
var generationKeys = []string{"temperature", "top_p", "top_k", "min_p", "repetition_penalty", "do_sample", "max_new_tokens"}

// Find returns the files of the checkpoint at path, opened as ck.
func Find(path string, ck format.Checkpoint) (Files, error) {
	var f Files
	meta := ck.Metadata()
	switch ck.Format() {
	case "gguf":
		if _, ok := meta["tokenizer.ggml.model"]; ok {
			tok, err := ggufTokenizer(meta)
			if err != nil {
				return f, err
			}
			f.Tokenizer = tok
		}
		f.ChatTemplate, _ = format.MetaString(meta, "tokenizer.chat_template")
		f.Specials = ggufSpecials(meta)
	case "safetensors":
		dir := folderOf(path)
		tok, err := FolderTokenizer(dir)
		if err != nil {
			return f, err
		}
		f.Tokenizer = tok
		if tok == nil && hasTokenizerFiles(dir) {
			f.TokenizerDir = dir
		}
		if err := folderExtras(dir, &f); err != nil {
			return f, err
		}
	case "llama2c":
		b, err := userfile.ReadFile(filepath.Join(filepath.Dir(path), "tokenizer.bin"), userfile.Tokenizer)
		if err == nil {
			f.Tokenizer = &tokenizer.Stored{Kind: "llama2c", Data: b}
		}
	}
	return f, nil
}

// Folder returns the files of a folder (a quantized model's, whose
// tokenizer may be a GGUF vocabulary saved beside it as tokenizerGGUF).
func Folder(dir, tokenizerFile string) (Files, error) {
	var f Files
	var err error
	if tokenizerFile != "" {
		f.Tokenizer, err = TokenizerFile(filepath.Join(dir, tokenizerFile))
	} else {
		f.Tokenizer, err = FolderTokenizer(dir)
		if err == nil && f.Tokenizer == nil && hasTokenizerFiles(dir) {
			f.TokenizerDir = dir
		}
	}
	if err != nil {
		return f, err
	}
	if err := folderExtras(dir, &f); err != nil {
		return f, err
	}
	if f.ChatTemplate == "" && f.Tokenizer != nil && f.Tokenizer.Kind == "gguf-metadata" {
		var meta map[string]any
		if json.Unmarshal(f.Tokenizer.Data, &meta) == nil {
			f.ChatTemplate, _ = meta["tokenizer.chat_template"].(string)
		}
	}
	return f, nil
}

func folderOf(path string) string {
	if st, err := os.Stat(path); err == nil && !st.IsDir() {
		return filepath.Dir(path)
	}
	return path
}

// hasTokenizerFiles reports whether dir holds tokenizer files of any
// layout tokenizer.LoadDir reads.
func hasTokenizerFiles(dir string) bool {
	for _, f := range []string{"tokenizer.json", "tokenizer.model", "vocab.json", "encoder.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return true
		}
	}
	return false
}

// TokenizerFile reads a tokenizer file a user names: tokenizer.json, a
// SentencePiece .model, a llama2.c .bin, a GGUF file's vocabulary, or a
// folder with tokenizer.json, tokenizer.model or a GPT-2 layout.
func TokenizerFile(path string) (*tokenizer.Stored, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if st.IsDir() {
		tok, err := FolderTokenizer(path)
		if err == nil && tok == nil {
			// no tokenizer FolderTokenizer knows: LoadDir names what a
			// folder must hold
			_, err = tokenizer.LoadDir(path)
		}
		return tok, err
	}
	if strings.HasSuffix(path, ".gguf") {
		ck, err := detect.Open(path)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		defer ck.Close()
		return ggufTokenizer(ck.Metadata())
	}
	kind := "tokenizer.json"
	switch {
	case strings.HasSuffix(path, ".model"):
		kind = "sentencepiece"
	case strings.HasSuffix(path, ".bin"):
		kind = "llama2c"
	}
	b, err := userfile.ReadFile(path, userfile.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return &tokenizer.Stored{Kind: kind, Data: b}, nil
}

// FolderTokenizer reads tokenizer.json or tokenizer.model from dir, else
// a GPT-2 layout (vocab.json + merges.txt or encoder.json + vocab.bpe,
// with tokenizer_config.json and added_tokens.json) as one stored
// tokenizer; nil if there is none of them.
func FolderTokenizer(dir string) (*tokenizer.Stored, error) {
	for _, f := range []struct{ name, kind string }{{"tokenizer.json", "tokenizer.json"}, {"tokenizer.model", "sentencepiece"}} {
		b, err := userfile.ReadFile(filepath.Join(dir, f.name), userfile.Tokenizer)
		if err == nil {
			return &tokenizer.Stored{Kind: f.kind, Data: b}, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
	}
	return tokenizer.StoreGPT2Dir(dir)
}

// ggufTokenizer stores a GGUF file's tokenizer.* metadata as one JSON object.
func ggufTokenizer(meta map[string]any) (*tokenizer.Stored, error) {
	sub := map[string]any{}
	for k, v := range meta {
		if !strings.HasPrefix(k, "tokenizer.") {
			continue
		}
		if b, ok := v.([]uint8); ok {
			// JSON would spell a byte array as a base64 string
			n := make([]uint16, len(b))
			for i, x := range b {
				n[i] = uint16(x)
			}
			v = n
		}
		sub[k] = v
	}
	b, err := json.Marshal(sub)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: gguf metadata: %w", err)
	}
	return &tokenizer.Stored{Kind: "gguf-metadata", Data: b}, nil
}

// ggufSpecials returns the text of a GGUF vocabulary's BOS and EOS tokens.
func ggufSpecials(meta map[string]any) chat.Specials {
	tokens, _ := format.MetaStrings(meta, "tokenizer.ggml.tokens")
	token := func(key string) string {
		if id, ok := format.MetaInt(meta, key); ok && id >= 0 && id < int64(len(tokens)) {
			return tokens[id]
		}
		return ""
	}
	return chat.Specials{BOS: token("tokenizer.ggml.bos_token_id"), EOS: token("tokenizer.ggml.eos_token_id")}
}

// Llama2CTokenizerSize checks that a llama2.c tokenizer has vocab tokens
// (the format does not record its size, and a wrong one gives garbage
// silently); other kinds pass.
func Llama2CTokenizerSize(tok *tokenizer.Stored, vocab int, name string) error {
	if tok == nil || tok.Kind != "llama2c" {
		return nil
	}
	n, err := tokenizer.Llama2CTokenCount(tok.Data)
	if err != nil {
		return fmt.Errorf("tokenizer %s: %w", name, err)
	}
	if n != vocab {
		return fmt.Errorf("llama2.c tokenizer %s has %d tokens, the model's vocabulary is %d", name, n, vocab)
	}
	return nil
}

// folderExtras reads what a Hugging Face folder says about generation: the
// chat template of chat_template.jinja or tokenizer_config.json, with its
// special tokens, and the defaults of generation_config.json. Absent files
// are fine; malformed ones are errors naming the file.
func folderExtras(dir string, f *Files) error {
	if f.ChatTemplate == "" {
		if b, err := userfile.ReadFile(filepath.Join(dir, chat.TemplateFile), userfile.Template); err == nil {
			f.ChatTemplate = string(b)
		}
		cfg := filepath.Join(dir, "tokenizer_config.json")
		if _, err := os.Stat(cfg); err == nil {
			t, sp, err := chat.FromTokenizerConfig(cfg)
			switch {
			case err == nil:
				if f.ChatTemplate == "" {
					f.ChatTemplate = t.Source()
				}
				f.Specials = sp
			case !errors.Is(err, chat.ErrNoTemplate):
				return fmt.Errorf("%s: %w", cfg, err)
			}
		}
	}
	if b, err := userfile.ReadFile(filepath.Join(dir, "generation_config.json"), userfile.Config.Named("generation config")); err == nil {
		var g map[string]any
		if err := json.Unmarshal(b, &g); err != nil {
			return fmt.Errorf("generation_config.json: %w", err)
		}
		f.Generation = map[string]any{}
		for _, k := range generationKeys {
			if v, ok := g[k]; ok {
				f.Generation[k] = v
			}
		}
		if _, err := gendefaults.Parse(f.Generation); err != nil {
			return fmt.Errorf("generation_config.json: %w", err)
		}
	}
	return nil
}

// ChatTemplate finds the chat template of a path: a folder's
// chat_template.jinja or tokenizer_config.json, one of those files named
// directly, or a GGUF file's tokenizer.chat_template. ErrNoTemplate says
// there is none.
func ChatTemplate(path string) (src string, sp chat.Specials, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", sp, fmt.Errorf("chat template: %w", err)
	}
	if !st.IsDir() {
		switch {
		case strings.HasSuffix(path, ".jinja"):
			b, err := userfile.ReadFile(path, userfile.Template)
			return string(b), sp, err
		case strings.HasSuffix(path, ".json"):
			t, sp, err := chat.FromTokenizerConfig(path)
			if err != nil {
				return "", sp, err
			}
			return t.Source(), sp, nil
		case strings.HasSuffix(path, ".gguf"):
			ck, err := detect.Open(path)
			if err != nil {
				return "", sp, err
			}
			defer ck.Close()
			f, err := Find(path, ck)
			if err == nil && f.ChatTemplate == "" {
				err = fmt.Errorf("%s: %w (no tokenizer.chat_template key)", path, ErrNoTemplate)
			}
			return f.ChatTemplate, f.Specials, err
		}
		path = filepath.Dir(path)
	}
	var f Files
	if err := folderExtras(path, &f); err != nil {
		return "", sp, err
	}
	if f.ChatTemplate == "" {
		return "", sp, fmt.Errorf("%s: %w (no tokenizer_config.json template or %s)", path, ErrNoTemplate, chat.TemplateFile)
	}
	return f.ChatTemplate, f.Specials, nil
}

// ErrNoTemplate is returned when a model carries no chat template.
var ErrNoTemplate = chat.ErrNoTemplate
