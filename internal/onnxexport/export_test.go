package onnxexport

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/qdq"
)

// TestExportRefusesBadOptions checks the refusals of an AR length below 2,
// a context shorter than it and KV scales that miss a layer, and that a
// refused export writes nothing.
func TestExportRefusesBadOptions(t *testing.T) {
	m := loadModel(t, "models/stories260K/stories260K.gguf")
	for _, c := range []struct {
		opts Options
		want string
	}{
		{Options{ARLen: 1, Context: 64}, "AR length 1"},
		{Options{ARLen: 32, Context: 16}, "context 16 is shorter"},
		{Options{ARLen: 4, Context: 16, Quant: &QDQ{KV: &qdq.KV{}}}, "kv scales do not cover attention layer 0"},
	} {
		dir := filepath.Join(t.TempDir(), "out")
		err := Export(dir, m, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error with %q", c.opts, err, c.want)
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("%+v: the refused export made %s", c.opts, dir)
		}
	}
}

// TestExportWritesNoTemporaryFiles checks that an export leaves exactly
// its four files, readable by others.
func TestExportWritesNoTemporaryFiles(t *testing.T) {
	m := loadModel(t, "models/stories260K/stories260K.gguf")
	dir := t.TempDir()
	if err := Export(dir, m, Options{ARLen: 4, Context: 16}); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
		if info, err := e.Info(); err != nil || info.Mode().Perm() != 0o644 {
			t.Errorf("%s: mode %v (%v)", e.Name(), info.Mode(), err)
		}
	}
	if strings.Join(names, " ") != "decode.onnx genai_config.json model.onnx.data prefill.onnx" {
		t.Fatalf("files %v", names)
	}
}
