package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// KindGPT2Files is the Stored kind of a GPT-2 layout tokenizer, which a
// folder keeps in several files (vocab.json + merges.txt, or encoder.json
// + vocab.bpe, with tokenizer_config.json and added_tokens.json): its
// Data is a gpt2Stored JSON object holding them all.
const KindGPT2Files = "gpt2-files"

// gpt2Stored is the Data of a KindGPT2Files tokenizer.
type gpt2Stored struct {
	Vocab  string            `json:"vocab"`  // the vocabulary's file name
	Merges string            `json:"merges"` // the merges' file name
	Files  map[string][]byte `json:"files"`  // contents by file name
}

// gpt2Layouts are the vocabulary and merges file pairs of the GPT-2
// layouts, in the order a folder is searched.
var gpt2Layouts = [][2]string{{"vocab.json", "merges.txt"}, {"encoder.json", "vocab.bpe"}}

// StoreGPT2Dir reads the GPT-2 layout tokenizer of dir (the first layout
// of gpt2Layouts whose two files exist, with the extras beside them) as
// one Stored; nil when dir holds neither layout.
func StoreGPT2Dir(dir string) (*Stored, error) {
	for _, l := range gpt2Layouts {
		if !isFile(filepath.Join(dir, l[0])) || !isFile(filepath.Join(dir, l[1])) {
			continue
		}
		files, err := readGPT2Files(dir, l[0], l[1])
		if err != nil {
			return nil, err
		}
		data, err := json.Marshal(gpt2Stored{Vocab: l[0], Merges: l[1], Files: files})
		if err != nil {
			return nil, fmt.Errorf("tokenizer: storing %s: %w", dir, err)
		}
		return &Stored{Kind: KindGPT2Files, Data: data}, nil
	}
	return nil, nil
}

// parseGPT2Stored builds the tokenizer of StoreGPT2Dir's data.
func parseGPT2Stored(data []byte) (*BPE, error) {
	var s gpt2Stored
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, &FormatError{Format: KindGPT2Files, Msg: fmt.Sprintf("invalid JSON: %v", err)}
	}
	for _, name := range []string{s.Vocab, s.Merges} {
		if _, ok := s.Files[name]; !ok || name == "" {
			return nil, &FormatError{Format: KindGPT2Files, Field: "files", Msg: fmt.Sprintf("no file %q", name)}
		}
	}
	return gpt2FromFiles(s.Files, "", s.Vocab, s.Merges)
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir()
}
