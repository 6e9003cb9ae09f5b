package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/aotlm/aotlm/internal/userfile"
)

// tiktoken files (Llama 3's original/tokenizer.model) hold one token per
// line: "<base64 of the token's bytes> <rank>". The rank is the token id and
// also the merge priority: BPE repeatedly joins the adjacent pair whose
// concatenation has the lowest rank. That equals ordinary merge rules with
// one rule per (left, right) split of every token, ranked by the token,
// which is how the file is loaded here.

// LoadTiktoken reads a tiktoken BPE file. pre names the pre-tokenizer as
// GGUF's tokenizer.ggml.pre does; "" picks Llama 3's ("llama-bpe"), or
// "gpt-4o" for o200k-sized vocabularies. Special tokens come from
// tokenizer_config.json beside the file when it exists.
func LoadTiktoken(path, pre string) (*BPE, error) {
	data, err := userfile.ReadFile(path, userfile.Tokenizer)
	if err != nil {
		return nil, fmt.Errorf("tiktoken: %w", err)
	}
	b, err := parseTiktoken(data, path)
	if err != nil {
		return nil, err
	}
	if pre == "" {
		pre = "llama-bpe"
		if len(b.ids) >= 199998 {
			pre = "gpt-4o"
		}
	}
	preset, ok := pretokPreset(pre)
	if !ok {
		return nil, &UnsupportedError{Format: "tiktoken", File: path, What: fmt.Sprintf("pre-tokenizer %q", pre)}
	}
	cfg, err := readHFConfig(filepath.Join(filepath.Dir(path), "tokenizer_config.json"))
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		for _, t := range cfg.addedTokens() {
			b.added.add(t)
		}
	}
	b.applyPreset(preset)
	// tiktoken looks a whole piece up before merging.
	b.ignoreMerges = true
	b.finish()
	cfg.applyIDs(b)
	cfg.applyAddSpecial(b, preset.addBOS)
	return b, nil
}

// isTiktoken reports whether data starts like a tiktoken file.
func isTiktoken(data []byte) bool {
	line, _, _ := bytes.Cut(data[:min(len(data), 512)], []byte("\n"))
	tok, rank, ok := bytes.Cut(line, []byte(" "))
	if !ok || len(tok) == 0 {
		return false
	}
	if _, err := base64.StdEncoding.DecodeString(string(tok)); err != nil {
		return false
	}
	_, err := strconv.Atoi(string(bytes.TrimRight(rank, "\r")))
	return err == nil
}

func parseTiktoken(data []byte, path string) (*BPE, error) {
	bad := func(line int, format string, args ...any) error {
		return &FormatError{Format: "tiktoken", File: path, Field: fmt.Sprintf("line %d", line), Msg: fmt.Sprintf(format, args...)}
	}
	b := newBPE()
	b.byteLevel = true
	b.dec = decByteLevel{}
	raw := map[string]int32{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64*1024), len(data)+1)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimRight(sc.Bytes(), "\r")
		if len(line) == 0 {
			continue
		}
		tok64, rankStr, ok := bytes.Cut(line, []byte(" "))
		if !ok {
			return nil, bad(n, "not \"base64 rank\"")
		}
		tok, err := base64.StdEncoding.DecodeString(string(tok64))
		if err != nil || len(tok) == 0 {
			return nil, bad(n, "bad base64 token %q", tok64)
		}
		rank, err := strconv.ParseInt(string(rankStr), 10, 32)
		if err != nil || rank < 0 || rank >= int64(n+maxIDGap) {
			return nil, bad(n, "bad rank %q", rankStr)
		}
		if _, dup := raw[string(tok)]; dup {
			return nil, bad(n, "token %q listed twice", tok)
		}
		if int(rank) < len(b.tokens) && b.tokens[rank] != "" {
			return nil, bad(n, "rank %d listed twice", rank)
		}
		chars := bpeBytesToChars(string(tok))
		raw[string(tok)] = int32(rank)
		b.setToken(int32(rank), chars)
		b.ids[chars] = int32(rank)
	}
	if n == 0 {
		return nil, &FormatError{Format: "tiktoken", File: path, Msg: "empty file"}
	}
	b.merges = make(map[uint64]bpeMerge, len(raw))
	for tok, id := range raw {
		for k := 1; k < len(tok); k++ {
			l, ok1 := raw[tok[:k]]
			r, ok2 := raw[tok[k:]]
			if ok1 && ok2 {
				b.merges[bpePairKey(l, r)] = bpeMerge{rank: id, id: id}
			}
		}
	}
	return b, nil
}
