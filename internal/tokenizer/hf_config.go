package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"

	"github.com/aotlm/aotlm/internal/userfile"
)

// hfConfig is the part of tokenizer_config.json a tokenizer needs.
type hfConfig struct {
	AddedTokensDecoder map[string]hfAddedToken `json:"added_tokens_decoder"`
	BosToken           json.RawMessage         `json:"bos_token"`
	EosToken           json.RawMessage         `json:"eos_token"`
	AddBosToken        *bool                   `json:"add_bos_token"`
	AddEosToken        *bool                   `json:"add_eos_token"`
	TokenizerClass     string                  `json:"tokenizer_class"`

	bos, eos string // token contents, "" if none
}

// readHFConfig reads tokenizer_config.json; a missing file gives nil, nil.
func readHFConfig(path string) (*hfConfig, error) {
	data, err := userfile.ReadFile(path, userfile.Config.Named("tokenizer config"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer_config.json: %w", err)
	}
	return parseHFConfig(data, path)
}

func parseHFConfig(data []byte, path string) (*hfConfig, error) {
	bad := func(field, format string, args ...any) error {
		return &FormatError{Format: "tokenizer_config.json", File: path, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	var c hfConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, bad("", "invalid JSON: %v", err)
	}
	var err error
	if c.bos, err = specialContent(c.BosToken); err != nil {
		return nil, bad("bos_token", "%v", err)
	}
	if c.eos, err = specialContent(c.EosToken); err != nil {
		return nil, bad("eos_token", "%v", err)
	}
	for k, t := range c.AddedTokensDecoder {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil || id < 0 || id >= maxVocab {
			return nil, bad("added_tokens_decoder", "key %q is not a token id", k)
		}
		if t.Content == "" {
			return nil, bad("added_tokens_decoder."+k+".content", "empty")
		}
	}
	return &c, nil
}

// specialContent reads a special token written as "<s>", as
// {"content": "<s>", ...}, or as null.
func specialContent(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var obj struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", errors.New("neither a string nor an object with content")
	}
	return obj.Content, nil
}

// addedTokens lists added_tokens_decoder in id order.
func (c *hfConfig) addedTokens() []AddedToken {
	var out []AddedToken
	for k, t := range c.AddedTokensDecoder {
		id, _ := strconv.ParseInt(k, 10, 32)
		out = append(out, AddedToken{ID: int32(id), Content: t.Content, Special: t.Special,
			Normalized: t.Normalized, LStrip: t.LStrip, RStrip: t.RStrip, SingleWord: t.SingleWord})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// applyIDs sets BOS/EOS from the config's bos_token/eos_token.
func (c *hfConfig) applyIDs(b *BPE) {
	if c == nil {
		return
	}
	if id := b.ID(c.bos); c.bos != "" && id >= 0 {
		b.bos = id
	}
	if id := b.ID(c.eos); c.eos != "" && id >= 0 {
		b.eos = id
	}
}

// applyAddSpecial sets the BOS/EOS added by AddSpecial for layouts with no
// post-processor: add_bos_token / add_eos_token when present, else
// defaultBOS.
func (c *hfConfig) applyAddSpecial(b *BPE, defaultBOS bool) {
	addBOS, addEOS := defaultBOS, false
	if c != nil && c.AddBosToken != nil {
		addBOS = *c.AddBosToken
	}
	if c != nil && c.AddEosToken != nil {
		addEOS = *c.AddEosToken
	}
	b.prefix, b.suffix = nil, nil
	if addBOS && b.bos >= 0 {
		b.prefix = []int{b.bos}
	}
	if addEOS && b.eos >= 0 {
		b.suffix = []int{b.eos}
	}
}
