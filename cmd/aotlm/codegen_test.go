package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// TestLogitsCodegen2 runs `aotlm logits` on the codegen2 fixture (HF folder
// only: llama.cpp has no CodeGen converter) from the folder and from an
// artifact compiled with AR-8 prefill passes, each with --mode hybrid and
// kv, and compares every position with the fixture's float64
// transcription of HF's code within its README's 2e-4 (the erf GELU in
// place of gelu_new would miss by 8e-4). Then it quantizes the folder with
// the default recipe and compiles the result with float and int8
// activations, as for the other families.
func TestLogitsCodegen2(t *testing.T) {
	checkLogitsFamily(t, logitsFamily{name: "codegen2", tol: 2e-4})
}

// gpt2ByteRunes maps each byte to the rune GPT-2's byte-level vocabulary
// writes it as: printable Latin-1 bytes stand for themselves, the others
// take the runes from U+0100 on, in byte order.
func gpt2ByteRunes() [256]rune {
	var m [256]rune
	next := rune(256)
	for b := range 256 {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE {
			m[b] = rune(b)
		} else {
			m[b] = next
			next++
		}
	}
	return m
}

// codegen2Specials are the last tokens of writeGPT2Tokenizer's
// vocabulary: GPT-2's end of text and CodeGen2's infill markers, listed
// in added_tokens.json so that a prompt's text names them.
var codegen2Specials = []string{"<|endoftext|>", "<mask_1>", "<sep>", "<eom>"}

// writeGPT2Tokenizer writes vocab.json, merges.txt and added_tokens.json
// of a byte-level BPE of vocab tokens into dir: the 256 bytes, merges of
// adjacent symbols of text's words (each merge's parts already tokens),
// and codegen2Specials last.
func writeGPT2Tokenizer(t *testing.T, dir string, vocab int, text string) {
	t.Helper()
	br := gpt2ByteRunes()
	ids := map[string]int{}
	for b := range 256 {
		ids[string(br[b])] = b
	}
	var merges []string
	for _, w := range strings.Fields(text) {
		var syms []string
		for _, b := range []byte(" " + w) {
			syms = append(syms, string(br[b]))
		}
		for i := 0; i+1 < len(syms) && len(ids) < vocab-len(codegen2Specials); i++ {
			tok := syms[i] + syms[i+1]
			if _, ok := ids[tok]; ok {
				continue
			}
			ids[tok] = len(ids)
			merges = append(merges, syms[i]+" "+syms[i+1])
		}
	}
	if len(ids) != vocab-len(codegen2Specials) {
		t.Fatalf("the text gives %d merges, want %d", len(merges), vocab-256-len(codegen2Specials))
	}
	added := map[string]int{}
	for _, tok := range codegen2Specials {
		ids[tok], added[tok] = len(ids), len(ids)
	}
	for name, m := range map[string]map[string]int{"vocab.json": ids, "added_tokens.json": added} {
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := "#version: 0.2\n" + strings.Join(merges, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "merges.txt"), []byte(m), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCodegen2GPT2Tokenizer gives the codegen2 fixture's weights a GPT-2
// layout tokenizer (vocab.json + merges.txt + added_tokens.json, no
// tokenizer.json) of its 384 tokens and runs the commands a user would:
// tokenize, run, ppl, compile, then run (with the tokenizer the artifact
// stores, and with --tokenizer naming the folder) and bench on the
// artifact; both runs give the folder's greedy text.
func TestCodegen2GPT2Tokenizer(t *testing.T) {
	text := string(testutil.ReadFile(t, "text/TinyStories-valid-excerpt.txt"))
	dir := t.TempDir()
	testutil.CopyFiles(t, testutil.Path(t, "arch/codegen2"), dir, "config.json", "model.safetensors")
	writeGPT2Tokenizer(t, dir, 384, text)
	data := filepath.Join(t.TempDir(), "text.txt")
	if err := os.WriteFile(data, []byte(text[:4000]), 0o644); err != nil {
		t.Fatal(err)
	}
	// a fill-in-the-middle prompt as CodeGen2's model card builds it: each
	// marker is one token
	fim := "def hello():\n    <mask_1>\n    return name<|endoftext|><sep><mask_1>"
	code, out, stderr := runCLI(t, "tokenize", "-m", dir, "--json", fim)
	if code != 0 {
		t.Fatalf("tokenize: exit %d: %s", code, stderr)
	}
	var got struct {
		IDs []int `json:"ids"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("tokenize --json: %v: %s", err, out)
	}
	count := map[int]int{}
	for _, id := range got.IDs {
		count[id]++
	}
	if count[380] != 1 || count[381] != 2 || count[382] != 1 {
		t.Errorf("FIM prompt ids %v: want <|endoftext|> (380) once, <mask_1> (381) twice, <sep> (382) once", got.IDs)
	}
	var runs []string // the output of every run
	for _, args := range [][]string{
		{"tokenize", "-m", dir, "Once upon a time"},
		{"run", "-m", dir, "--no-compile", "--temp", "0", "-n", "8", "-p", "Once upon a time"},
		{"run", "-m", dir, "--temp", "0", "-n", "8", "-p", "Once upon a time"},
		{"ppl", "-m", dir, "-f", data, "--ctx", "64", "--chunks", "2"},
	} {
		code, out, stderr := runCLI(t, args...)
		t.Logf("%s: %s", args[0], out)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if args[0] == "run" {
			runs = append(runs, out)
		}
	}
	aot := filepath.Join(t.TempDir(), "codegen2.aot")
	if code, _, stderr := runCLI(t, "compile", dir, "-o", aot, "--ar-len", "8", "--ctx", "64"); code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	for _, args := range [][]string{
		{"run", "-m", aot, "--temp", "0", "-n", "8", "-p", "Once upon a time"},
		{"run", "-m", aot, "--tokenizer", dir, "--temp", "0", "-n", "8", "-p", "Once upon a time"},
		{"bench", "-m", aot, "-p", "16", "-n", "8", "-r", "1"},
	} {
		code, out, stderr := runCLI(t, args...)
		t.Logf("%s: %s", args[0], out)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		if args[0] == "run" {
			runs = append(runs, out)
		}
	}
	for i, out := range runs {
		if out != runs[0] {
			t.Errorf("run %d printed %q, the folder's interpreter %q", i, out, runs[0])
		}
	}
}
