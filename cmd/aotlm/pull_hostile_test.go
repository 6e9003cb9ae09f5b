package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aotlm/aotlm/internal/hf/hub/hubtest"
)

// TestPullAndListEscapeServerNames: file names a Hub chose with terminal
// escapes, control characters and bidi overrides reach stdout and stderr
// of pull and list only as visible escapes, and so do names in the cache.
func TestPullAndListEscapeServerNames(t *testing.T) {
	hub := hubtest.New()
	defer hub.Close()
	evil := "model\x1b]0;owned\x07\u202e-Q4_K_M\x1b[2J.gguf"
	hub.AddRepo("test-org/escapes", map[string][]byte{evil: []byte("GGUF not really"), "config.json": []byte("{}")})
	hubDir := hubEnv(t, hub)
	// a cache folder another tool wrote, with an escape in its name
	bad := filepath.Join(hubDir, "models--org--na\x1b[31mme", "snapshots", "0123456789abcdef0123456789abcdef01234567")
	if err := os.MkdirAll(bad, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "w\x1b[1m.safetensors"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// a tag matching no file: the error lists the server's file names
	code, _, stderr := runCLI(t, "pull", "test-org/escapes:Q8_0")
	if code != 1 || strings.ContainsAny(stderr, "\x1b\x07\u202e") || !strings.Contains(stderr, `\x1b]0;owned`) {
		t.Errorf("pull of a missing tag: exit %d: %q", code, stderr)
	}
	for _, args := range [][]string{{"pull", "test-org/escapes"}, {"list"}, {"rm", "org/na\x1b[31mme"}} {
		code, stdout, stderr := runCLI(t, args...)
		if strings.ContainsAny(stdout+stderr, "\x1b\x07\u202e") {
			t.Errorf("%v (exit %d) printed a raw escape:\n%q\n%q", args[0], code, stdout, stderr)
		}
		if args[0] != "rm" && code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, stderr)
		}
		if args[0] == "pull" && !strings.Contains(stdout, `\x1b]0;owned\x07\u202e`) {
			t.Errorf("pull: the name is not shown escaped: %q", stdout)
		}
	}
}

// TestPullStalledBodyFails: with HF_HUB_DOWNLOAD_TIMEOUT set, a download
// whose body stops coming fails with a one-line error within the timeout,
// and the next pull resumes it.
func TestPullStalledBodyFails(t *testing.T) {
	hub := hubtest.New()
	defer hub.Close()
	data := make([]byte, 200_000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	hub.AddRepo("test-org/stall", map[string][]byte{"m-Q4_0.gguf": data})
	hubEnv(t, hub)
	t.Setenv("HF_HUB_DOWNLOAD_TIMEOUT", "0.5")
	hub.StallNext("m-Q4_0.gguf", 50_000)
	start := time.Now()
	code, _, stderr := runCLI(t, "pull", "test-org/stall")
	if code != 1 || !strings.Contains(stderr, "sent nothing") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("stalled pull: exit %d: %s", code, stderr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the stalled pull took %v", d)
	}
	if code, _, stderr := runCLI(t, "pull", "test-org/stall"); code != 0 {
		t.Fatalf("pull after a stall: %s", stderr)
	}
	if got := hub.Served("m-Q4_0.gguf"); got != int64(len(data)) {
		t.Errorf("served %d bytes in all for %d: the second pull did not resume", got, len(data))
	}
}
