package hub

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"
)

// modelFiles are the files beside the weights that a model needs.
var modelFiles = map[string]bool{
	"config.json": true, "generation_config.json": true,
	"tokenizer.json": true, "tokenizer_config.json": true, "tokenizer.model": true,
	"vocab.json": true, "merges.txt": true, "special_tokens_map.json": true,
	"chat_template.jinja": true, "chat_template.json": true, "added_tokens.json": true,
	"modules.json": true,
}

// moduleFile matches the files of a sentence-transformers module folder
// that a model reads (1_Pooling/config.json, 2_Dense/model.safetensors).
var moduleFile = regexp.MustCompile(`^\d+_[^/]+/(config\.json|model\.safetensors)$`)

// DefaultQuant is the GGUF quantization picked when a repository holds
// several and the reference names none (what llama.cpp's -hf picks too).
const DefaultQuant = "Q4_K_M"

var shardSuffix = regexp.MustCompile(`-\d{5}-of-\d{5}(\.[A-Za-z]+)$`)

// Select keeps the files of a repository a model needs. For a checkpoint
// (safetensors, else PyTorch .bin) that is the configuration, tokenizer and
// weight files at the top level, with the shard index if there is one,
// and for a sentence-transformers model its modules.json and its module
// folders' config.json and model.safetensors (EmbeddingGemma's pooling
// and dense projections). For a repository of GGUF files it is one GGUF, or the shards
// of one, whose name holds the quantization tag quant (case-insensitive,
// as a whole word: "Q4_K" does not match "Q4_K_M"); model is then that
// file's path. Without a tag a checkpoint is preferred, then a lone GGUF,
// then DefaultQuant; anything else is ambiguous and the error lists the
// choices.
func Select(files []File, quant string) (pick []File, model string, err error) {
	var top, ggufs, modules []File
	for _, f := range files {
		if moduleFile.MatchString(f.Path) {
			modules = append(modules, f)
		}
		if strings.HasSuffix(strings.ToLower(f.Path), ".gguf") {
			if !strings.Contains(strings.ToLower(path.Base(f.Path)), "mmproj") {
				ggufs = append(ggufs, f)
			}
			continue
		}
		if !strings.Contains(f.Path, "/") {
			top = append(top, f)
		}
	}
	if quant != "" || !hasWeights(top) {
		if len(ggufs) == 0 {
			if quant != "" {
				return nil, "", fmt.Errorf("a quantization tag (:%s) picks among GGUF files, and this repository has none", quant)
			}
			return nil, "", errors.New("no model weights here: no *.safetensors, pytorch_model*.bin or *.gguf files")
		}
		return selectGGUF(ggufs, quant)
	}
	for _, f := range top {
		if modelFiles[f.Path] {
			pick = append(pick, f)
			if f.Path == "modules.json" {
				pick = append(pick, modules...)
			}
		}
	}
	weights, err := selectWeights(top)
	if err != nil {
		return nil, "", err
	}
	return append(pick, weights...), "", nil
}

func hasWeights(top []File) bool {
	for _, f := range top {
		if strings.HasSuffix(f.Path, ".safetensors") || isTorchBin(f.Path) {
			return true
		}
	}
	return false
}

func isTorchBin(p string) bool {
	return strings.HasPrefix(p, "pytorch_model") && strings.HasSuffix(p, ".bin")
}

// selectWeights picks safetensors files (else PyTorch .bin files) and their
// index. Mistral-style repositories carry both consolidated.safetensors and
// the sharded export; the latter is what config.json describes.
func selectWeights(top []File) ([]File, error) {
	index := "model.safetensors.index.json"
	isWeight := func(p string) bool { return strings.HasSuffix(p, ".safetensors") }
	if !hasSuffix(top, ".safetensors") {
		index = "pytorch_model.bin.index.json"
		isWeight = isTorchBin
	}
	var weights []File
	var idx *File
	for i, f := range top {
		switch {
		case f.Path == index:
			idx = &top[i]
		case isWeight(f.Path):
			weights = append(weights, f)
		}
	}
	if len(weights) > 1 {
		var rest []File
		for _, f := range weights {
			if !strings.HasPrefix(f.Path, "consolidated") {
				rest = append(rest, f)
			}
		}
		if len(rest) > 0 {
			weights = rest
		}
	}
	if idx != nil {
		weights = append(weights, *idx)
	}
	return weights, nil
}

func hasSuffix(files []File, s string) bool {
	for _, f := range files {
		if strings.HasSuffix(f.Path, s) {
			return true
		}
	}
	return false
}

// selectGGUF groups GGUF files into models (the shards of a split file are
// one model) and picks the one quant names.
func selectGGUF(ggufs []File, quant string) ([]File, string, error) {
	groups := map[string][]File{}
	var names []string
	for _, f := range ggufs {
		key := shardSuffix.ReplaceAllString(f.Path, "$1")
		if _, ok := groups[key]; !ok {
			names = append(names, key)
		}
		groups[key] = append(groups[key], f)
	}
	sort.Strings(names)
	var match []string
	switch {
	case quant != "":
		match = matchQuant(names, quant)
	case len(names) == 1:
		match = names
	default:
		match = matchQuant(names, DefaultQuant)
	}
	if len(match) != 1 {
		var tags []string
		for _, n := range names {
			tags = append(tags, "  "+n)
		}
		list := strings.Join(tags, "\n")
		switch {
		case quant == "":
			return nil, "", fmt.Errorf("this repository holds several GGUF files and none is %s; name one with org/name:TAG, from:\n%s", DefaultQuant, list)
		case len(match) == 0:
			return nil, "", fmt.Errorf("no GGUF file matches the tag %q; the files are:\n%s", quant, list)
		}
		var ms []string
		for _, m := range match {
			ms = append(ms, "  "+m)
		}
		return nil, "", fmt.Errorf("the tag %q matches several GGUF files; name one precisely:\n%s", quant, strings.Join(ms, "\n"))
	}
	files := groups[match[0]]
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	return files, files[0].Path, nil
}

// matchQuant keeps the names that contain tag as a whole word, ignoring
// case; word characters are letters and digits, so "Q4_K" in "x-Q4_K_M"
// is not whole (it continues with "_M").
func matchQuant(names []string, tag string) []string {
	t := strings.ToLower(tag)
	var out []string
	for _, n := range names {
		base := strings.ToLower(strings.TrimSuffix(path.Base(n), path.Ext(n)))
		dir := strings.ToLower(path.Dir(n))
		if containsWord(base, t) || containsWord(dir, t) {
			out = append(out, n)
		}
	}
	return out
}

func containsWord(s, w string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		j += i
		end := j + len(w)
		if (j == 0 || !isWordByte(s[j-1])) && (end == len(s) || !isWordByte(s[end])) {
			return true
		}
		i = j + 1
	}
}

// isWordByte: letters, digits and '_' continue a quant tag ("Q4_K" + "_M").
func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '_'
}
