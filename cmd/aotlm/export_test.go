package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/testutil"
)

// TestExportCommand runs `aotlm export --format onnx` on stories260K as a
// float model and as a w4a16-lpbq folder, checks the files and the config
// each writes, and the refusals of a bad format, activations and family.
func TestExportCommand(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	tmp := t.TempDir()
	q := filepath.Join(tmp, "q")
	if code, _, errs := runCLI(t, "quantize", src, "-o", q, "--recipe", "w4a16-lpbq"); code != 0 {
		t.Fatalf("quantize: %s", errs)
	}
	calib := testutil.Path(t, "text/TinyStories-valid-excerpt.txt")
	for _, c := range []struct {
		name, model string
		args        []string
		acts, cache string
	}{
		{"float", src, nil, "float", "float32"},
		{"qdq", q, nil, "qdq-uint16", "uint8"},
		{"w4-float", q, []string{"--activations", "float"}, "float", "float32"},
		{"calib", q, []string{"--calib", calib}, "qdq-uint16", "uint8"},
	} {
		out := filepath.Join(tmp, c.name)
		args := append([]string{"export", c.model, "-o", out, "--format", "onnx", "--ar-len", "16", "--ctx", "64"}, c.args...)
		code, stdout, errs := runCLI(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.name, code, errs)
		}
		if !strings.Contains(stdout, "AR-16 and AR-1, context 64") || (c.name == "calib") != strings.Contains(stdout, "ranges: text") {
			t.Errorf("%s: output %q", c.name, stdout)
		}
		for _, f := range []string{"prefill.onnx", "decode.onnx", "model.onnx.data", "genai_config.json"} {
			if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
				t.Fatalf("%s: %s: %v", c.name, f, err)
			}
		}
		var cfg struct {
			Model struct {
				Context int `json:"context_length"`
				Decoder struct {
					Activations string `json:"activations"`
					Cache       string `json:"kv_cache_type"`
					Layers      int    `json:"num_hidden_layers"`
				} `json:"decoder"`
			} `json:"model"`
		}
		b, err := os.ReadFile(filepath.Join(out, "genai_config.json"))
		if err == nil {
			err = json.Unmarshal(b, &cfg)
		}
		if err != nil {
			t.Fatal(err)
		}
		if d := cfg.Model.Decoder; cfg.Model.Context != 64 || d.Activations != c.acts || d.Cache != c.cache || d.Layers != 5 {
			t.Errorf("%s: config %+v", c.name, cfg)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"export", src, "-o", filepath.Join(tmp, "x"), "--format", "tflite"}, "the one format is onnx"},
		{[]string{"export", src, "-o", filepath.Join(tmp, "x"), "--activations", "int8"}, `activations "int8"`},
		{[]string{"export", src}, "-o DIR is required"},
		{[]string{"export", testutil.Path(t, "arch/lfm2"), "-o", filepath.Join(tmp, "x")}, "op causal_conv"},
		{[]string{"export", src, "-o", filepath.Join(tmp, "x"), "--calib", calib}, "needs --activations qdq"},
		{[]string{"export", q, "-o", filepath.Join(tmp, "x"), "--calib", filepath.Join(tmp, "none.txt")}, "none.txt"},
	} {
		code, _, errs := runCLI(t, c.args...)
		if code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, %q: want an error with %q", c.args, code, errs, c.want)
		}
	}
}
