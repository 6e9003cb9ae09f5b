package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aotlm/aotlm/internal/userfile"
)

// LoadGPT2 reads a byte-level BPE vocabulary in the GPT-2 layout: vocabPath
// is vocab.json or encoder.json ({"token": id}), mergesPath is merges.txt
// or vocab.bpe (one "left right" rule per line, by rank, after an optional
// "#version" line). pre names the pre-tokenizer as GGUF's
// tokenizer.ggml.pre does ("gpt-2", "llama-bpe", "qwen2", "smollm",
// "gpt-4o", ...). The result has no added tokens and adds no BOS.
func LoadGPT2(vocabPath, mergesPath, pre string) (*BPE, error) {
	b, err := readGPT2Vocab(vocabPath, mergesPath)
	if err != nil {
		return nil, err
	}
	preset, ok := pretokPreset(pre)
	if !ok {
		return nil, &UnsupportedError{Format: "gpt2", File: vocabPath, What: fmt.Sprintf("pre-tokenizer %q", pre)}
	}
	b.applyPreset(preset)
	b.finish()
	return b, nil
}

// readGPT2Vocab loads the vocabulary and merges, byte-level.
func readGPT2Vocab(vocabPath, mergesPath string) (*BPE, error) {
	vdata, err := userfile.ReadFile(vocabPath, userfile.Tokenizer.Named("vocabulary"))
	if err != nil {
		return nil, fmt.Errorf("gpt2 vocabulary: %w", err)
	}
	mdata, err := userfile.ReadFile(mergesPath, userfile.Tokenizer.Named("merges"))
	if err != nil {
		return nil, fmt.Errorf("gpt2 merges: %w", err)
	}
	return parseGPT2(vdata, mdata, vocabPath, mergesPath)
}

func parseGPT2(vdata, mdata []byte, vocabPath, mergesPath string) (*BPE, error) {
	vocabFormat := filepath.Base(vocabPath)
	var vocab map[string]int64
	if err := json.Unmarshal(vdata, &vocab); err != nil {
		return nil, &FormatError{Format: vocabFormat, File: vocabPath, Msg: fmt.Sprintf("invalid JSON: %v", err)}
	}
	b := newBPE()
	b.byteLevel = true
	b.dec = decByteLevel{}
	if err := b.setVocab(vocab, func(tok, msg string) error {
		return &FormatError{Format: vocabFormat, File: vocabPath, Field: fmt.Sprintf("%q", tok), Msg: msg}
	}); err != nil {
		return nil, err
	}
	merges, lines := gpt2MergeLines(mdata)
	mergesFormat := filepath.Base(mergesPath)
	if err := b.setMerges(merges, func(i int, msg string) error {
		return &FormatError{Format: mergesFormat, File: mergesPath, Field: fmt.Sprintf("line %d", lines[i]), Msg: msg}
	}); err != nil {
		return nil, err
	}
	return b, nil
}

// gpt2MergeLines splits a merges file into rules, skipping the "#version"
// header and blank lines; lines[i] is the 1-based line of rule i.
func gpt2MergeLines(data []byte) (rules []string, lines []int) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), len(data)+1)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), "\r")
		if line == "" || (n == 1 && strings.HasPrefix(line, "#version")) {
			continue
		}
		rules = append(rules, line)
		lines = append(lines, n)
	}
	return rules, lines
}

// applyPreset installs a named pre-tokenizer and its merge rule.
func (b *BPE) applyPreset(p bpePreset) {
	b.pre = p.preTokenizer()
	b.ignoreMerges = p.ignoreMerges
}

// gpt2Family picks the pre-tokenizer of a GPT-2 layout directory, which
// does not record it. The rules, first match wins:
//   - "<|begin_of_text|>" among the tokens: Llama 3 ("llama-bpe");
//   - tokenizer_class Qwen2Tokenizer[Fast]: "qwen2";
//   - at least 199998 tokens (the o200k vocabulary of Phi-4): "gpt-4o";
//   - exactly 49152 tokens (SmolLM, StarCoder): "smollm";
//   - otherwise GPT-2's own regex, "gpt-2".
func gpt2Family(b *BPE, cfg *hfConfig) string {
	if b.ID("<|begin_of_text|>") >= 0 {
		return "llama-bpe"
	}
	if cfg != nil && strings.HasPrefix(cfg.TokenizerClass, "Qwen2Tokenizer") {
		return "qwen2"
	}
	switch n := len(b.ids); {
	case n >= 199998:
		return "gpt-4o"
	case n == 49152:
		return "smollm"
	}
	return "gpt-2"
}

// loadGPT2Dir loads vocab + merges with tokenizer_config.json (and
// added_tokens.json) from dir.
func loadGPT2Dir(dir, vocabName, mergesName string) (*BPE, error) {
	files, err := readGPT2Files(dir, vocabName, mergesName)
	if err != nil {
		return nil, err
	}
	return gpt2FromFiles(files, dir, vocabName, mergesName)
}

// gpt2Extras are the files beside a GPT-2 layout's vocabulary and merges
// that gpt2FromFiles reads when present.
var gpt2Extras = []string{"tokenizer_config.json", "added_tokens.json"}

// readGPT2Files reads a GPT-2 layout's files from dir by name: the
// vocabulary and merges, and those of gpt2Extras that exist.
func readGPT2Files(dir, vocabName, mergesName string) (map[string][]byte, error) {
	files := map[string][]byte{}
	var err error
	if files[vocabName], err = userfile.ReadFile(filepath.Join(dir, vocabName), userfile.Tokenizer.Named("vocabulary")); err != nil {
		return nil, fmt.Errorf("gpt2 vocabulary: %w", err)
	}
	if files[mergesName], err = userfile.ReadFile(filepath.Join(dir, mergesName), userfile.Tokenizer.Named("merges")); err != nil {
		return nil, fmt.Errorf("gpt2 merges: %w", err)
	}
	for _, name := range gpt2Extras {
		data, err := userfile.ReadFile(filepath.Join(dir, name), userfile.Config.Named(name))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		files[name] = data
	}
	return files, nil
}

// gpt2FromFiles builds the tokenizer of a GPT-2 layout's files (by name;
// dir only names them in errors): vocabulary and merges, the added tokens
// of added_tokens.json and tokenizer_config.json, BOS/EOS from the latter,
// and the pre-tokenizer gpt2Family infers.
func gpt2FromFiles(files map[string][]byte, dir, vocabName, mergesName string) (*BPE, error) {
	b, err := parseGPT2(files[vocabName], files[mergesName], filepath.Join(dir, vocabName), filepath.Join(dir, mergesName))
	if err != nil {
		return nil, err
	}
	var cfg *hfConfig
	if data, ok := files["tokenizer_config.json"]; ok {
		if cfg, err = parseHFConfig(data, filepath.Join(dir, "tokenizer_config.json")); err != nil {
			return nil, err
		}
	}
	if data, ok := files["added_tokens.json"]; ok {
		if err := addAddedTokens(b, data, filepath.Join(dir, "added_tokens.json")); err != nil {
			return nil, err
		}
	}
	if cfg != nil {
		for _, t := range cfg.addedTokens() {
			b.added.add(t)
		}
	}
	preset, _ := pretokPreset(gpt2Family(b, cfg))
	b.applyPreset(preset)
	b.finish()
	cfg.applyIDs(b)
	cfg.applyAddSpecial(b, preset.addBOS)
	return b, nil
}

// addAddedTokens adds the tokens of added_tokens.json ({"content": id},
// read from path); they are not special unless tokenizer_config.json says
// so.
func addAddedTokens(b *BPE, data []byte, path string) error {
	var m map[string]int64
	if err := json.Unmarshal(data, &m); err != nil {
		return &FormatError{Format: "added_tokens.json", File: path, Msg: fmt.Sprintf("invalid JSON: %v", err)}
	}
	for content, id := range m {
		if id < 0 || id >= maxVocab || content == "" {
			return &FormatError{Format: "added_tokens.json", File: path, Field: fmt.Sprintf("%q", content), Msg: fmt.Sprintf("bad entry (id %d)", id)}
		}
		b.added.add(AddedToken{ID: int32(id), Content: content})
	}
	return nil
}
