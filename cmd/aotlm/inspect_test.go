package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/format/detect"
	"github.com/aotlm/aotlm/internal/testutil"
)

// aotlmPlus runs the command line in-process as run does, on a root that
// also holds inspect and bench, whether or not main registers them.
func aotlmPlus(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	defer func() {
		if r := recover(); r != nil {
			code, stdout, stderr = 2, out.String(), fmt.Sprintf("aotlm: internal error: %v\n", r)
		}
	}()
	root := newRoot(&out, &errb)
	have := map[string]bool{}
	for _, c := range root.Commands() {
		have[c.Name()] = true
	}
	for _, c := range []*cobra.Command{newInspectCmd(), newBenchCmd()} {
		if !have[c.Name()] {
			root.AddCommand(c)
		}
	}
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		fmt.Fprintf(&errb, "aotlm: %v\n", err)
		return 1, out.String(), errb.String()
	}
	return 0, out.String(), errb.String()
}

// compileStories compiles stories260K's GGUF with AR lengths 1 and 4 and a
// 64-position context, and returns the artifact's path.
func compileStories(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "stories.aot")
	code, _, stderr := runCLI(t, "compile", testutil.Path(t, "models/stories260K/stories260K.gguf"),
		"-o", out, "--ar-len", "4", "--ctx", "64")
	if code != 0 {
		t.Fatalf("compile: exit %d: %s", code, stderr)
	}
	return out
}

type inspectJSON struct {
	Architecture string `json:"architecture"`
	Ctx          int    `json:"ctx"`
	Vocab        int    `json:"vocab"`
	Weights      string `json:"weights"`
	Plans        []struct {
		ARLen int `json:"ar_len"`
	} `json:"plans"`
	Tokenizer struct {
		Kind string `json:"kind"`
	} `json:"tokenizer"`
	Sizes struct {
		File        int64            `json:"file"`
		Tensors     map[string]int64 `json:"tensors"`
		TensorCount map[string]int   `json:"tensor_count"`
		Params      int64            `json:"params"`
		KV          struct {
			Layers, Ctx, Cols, ElemBytes int
			Bytes                        int64
		} `json:"kv"`
		Arenas []struct {
			ARLen int   `json:"ar_len"`
			Bytes int64 `json:"bytes"`
		} `json:"arenas"`
	} `json:"sizes"`
}

// TestInspect checks inspect's JSON against the source checkpoint: the
// parameter count is the GGUF's element count, the KV cache is
// n_layer x ctx x (n_head_kv x head_dim) x 2 x 4 bytes from the GGUF's
// metadata, and the file size is the file's.
func TestInspect(t *testing.T) {
	path := compileStories(t)
	code, stdout, stderr := aotlmPlus(t, "inspect", path, "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got inspectJSON
	dec := json.NewDecoder(strings.NewReader(stdout))
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Fatalf("more than one JSON value: %s", stdout)
	}
	ck, err := detect.Open(testutil.Path(t, "models/stories260K/stories260K.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	md := ck.Metadata()
	layers := metaInt(t, md, "llama.block_count")
	heads := metaInt(t, md, "llama.attention.head_count")
	kvHeads := metaInt(t, md, "llama.attention.head_count_kv")
	dim := metaInt(t, md, "llama.embedding_length")
	var params int64
	for _, ti := range ck.Tensors() {
		n := int64(1)
		for _, d := range ti.Shape {
			n *= d
		}
		params += n
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	s := got.Sizes
	wantKV := int64(layers) * 64 * int64(kvHeads*dim/heads) * 2 * 4
	if got.Architecture == "" || got.Ctx != 64 || got.Weights != "f32" || got.Tokenizer.Kind == "" || len(got.Plans) != 2 {
		t.Errorf("manifest fields: %+v", got)
	}
	if s.File != st.Size() || s.KV.Bytes != wantKV || s.KV.Layers != layers || s.KV.Ctx != 64 {
		t.Errorf("file %d (want %d), kv %+v (want %d bytes)", s.File, st.Size(), s.KV, wantKV)
	}
	if s.Params < params || s.Tensors["f32"] < 4*params || s.TensorCount["f32"] < len(ck.Tensors()) {
		t.Errorf("params %d, f32 bytes %d, tensors %d; the checkpoint has %d params in %d tensors",
			s.Params, s.Tensors["f32"], s.TensorCount["f32"], params, len(ck.Tensors()))
	}
	if len(s.Arenas) != 2 || s.Arenas[0].ARLen != 1 || s.Arenas[1].ARLen != 4 || s.Arenas[0].Bytes <= 0 ||
		s.Arenas[1].Bytes <= s.Arenas[0].Bytes {
		t.Errorf("arenas %+v: want AR-1 and a larger AR-4", s.Arenas)
	}
	t.Logf("inspect --json:\n%s", stdout)
	// the text form names the same figures
	code, text, stderr := aotlmPlus(t, "inspect", path)
	if code != 0 {
		t.Fatalf("text: exit %d: %s", code, stderr)
	}
	t.Logf("inspect:\n%s", text)
	for _, want := range []string{"architecture", "AR-4", "KV cache", fmt.Sprint(wantKV), fmt.Sprint(st.Size()), "tensors f32"} {
		if !strings.Contains(text, want) {
			t.Errorf("text output lacks %q:\n%s", want, text)
		}
	}
}

func metaInt(t *testing.T, md map[string]any, key string) int {
	t.Helper()
	switch v := md[key].(type) {
	case uint32:
		return int(v)
	case int32:
		return int(v)
	case uint64:
		return int(v)
	case int64:
		return int(v)
	}
	t.Fatalf("metadata %s: %T %v", key, md[key], md[key])
	return 0
}

// TestInspectVerify flips one byte inside the weights section of a copy:
// plain inspect still succeeds (only --verify reads every weight byte),
// inspect --verify and run --verify fail naming the weights section.
func TestInspectVerify(t *testing.T) {
	path := compileStories(t)
	if code, stdout, stderr := aotlmPlus(t, "inspect", path, "--verify"); code != 0 || !strings.Contains(stdout, "verified") {
		t.Fatalf("intact file: exit %d: %s %s", code, stdout, stderr)
	}
	a, err := artifact.Open(path, artifact.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var off int64 = -1
	for _, s := range a.Sections() {
		if s.Kind == artifact.KindWeights {
			off = s.Offset + s.Size/2
		}
	}
	a.Close()
	if off < 0 {
		t.Fatal("no weights section")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[off] ^= 0x40
	bad := filepath.Join(t.TempDir(), "flipped.aot")
	if err := os.WriteFile(bad, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := aotlmPlus(t, "inspect", bad); code != 0 {
		t.Errorf("plain inspect of a flipped weight byte: exit %d: %s", code, stderr)
	}
	for _, args := range [][]string{{"inspect", bad, "--verify"}, {"inspect", bad, "--verify", "--json"},
		{"run", "-m", bad, "--verify", "-p", "x", "-n", "1"}} {
		code, stdout, stderr := aotlmPlus(t, args...)
		if code != 1 || !strings.Contains(stderr, "weights") || !strings.Contains(stderr, "checksum") {
			t.Errorf("%v: exit %d, stderr %q, want 1 and a checksum error naming the weights", args, code, stderr)
		}
		if stdout != "" {
			t.Errorf("%v: wrote %q to stdout", args, stdout)
		}
	}
}

func TestInspectBadInput(t *testing.T) {
	dir := t.TempDir()
	notAOT := filepath.Join(dir, "x.aot")
	if err := os.WriteFile(notAOT, []byte("GGUF not an artifact"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", filepath.Join(dir, "missing.aot")}, "no such file"},
		{[]string{"inspect", notAOT}, "magic"},
		{[]string{"inspect"}, "arg"},
	} {
		code, _, stderr := aotlmPlus(t, c.args...)
		if code != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q, want 1 and %q", c.args, code, stderr, c.want)
		}
	}
}
