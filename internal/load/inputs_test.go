package load

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestCheckInputs(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.gguf")
	if err := os.WriteFile(model, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckInputs(map[string]int{"-t": 2, "--parallel": 2}, []string{model}); err != nil {
		t.Fatal(err)
	}
	for _, counts := range []map[string]int{{"-t": 0}, {"-t": 1 << 20}, {"--jobs": 1 << 20}, {"--parallel": 0}, {"--parallel": 1 << 24}} {
		if err := CheckInputs(counts, nil); err == nil {
			t.Errorf("%v accepted", counts)
		}
	}
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckInputs(nil, []string{fifo}); err == nil {
		t.Error("a FIFO as a model accepted")
	}
	if _, err := ReadText(fifo, "prompt file"); err == nil {
		t.Error("a FIFO as a prompt file read")
	}
}
