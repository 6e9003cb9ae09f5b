package aotlm_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/testutil"
)

// goProgram matches a fenced Go block that is a whole file.
var goProgram = regexp.MustCompile("(?s)```go\n(package main\n.*?)```")

// TestEmbeddingProgramsOutsideModule builds the complete programs of
// docs/embedding.md in a module of their own, which requires this one
// through a replace as a user's module would, so that only the public API
// is in reach; then runs them on an artifact and checks what they print
// against the same requests made here.
func TestEmbeddingProgramsOutsideModule(t *testing.T) {
	root := testutil.RepoRoot()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "embedding.md"))
	if err != nil {
		t.Fatal(err)
	}
	progs := goProgram.FindAllStringSubmatch(string(doc), -1)
	if len(progs) != 2 {
		t.Fatalf("docs/embedding.md has %d complete Go programs, want 2 (generate, serve)", len(progs))
	}
	artifact := storiesArtifact()
	defer os.RemoveAll(filepath.Dir(artifact))
	const prompt = "Once upon a time"

	generate := buildOutside(t, progs[0][1])
	got := runProgram(t, generate, artifact, prompt)
	want := generateHere(t, artifact, prompt, aotlm.Request{MaxTokens: 64,
		Sampling: aotlm.Sampling{Temperature: 0.7, TopP: 0.95, Seed: 42}})
	if got != want+"\n" {
		t.Fatalf("the generate program printed %q, want %q", got, want+"\n")
	}

	server := buildOutside(t, progs[1][1])
	got = runProgram(t, server, artifact, prompt)
	want = generateHere(t, artifact, prompt, aotlm.Request{MaxTokens: 32})
	if got != want+"\n" {
		t.Fatalf("the server program printed %q, want %q", got, want+"\n")
	}
}

// buildOutside builds src as the main package of an outside module.
func buildOutside(t *testing.T, src string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "prog")
	if out, err := testutil.GoOutside(t, map[string]string{"main.go": src}, "build", "-o", bin, "."); err != nil {
		t.Fatalf("building the program as an outside module: %v\n%s\n%s", err, out, src)
	}
	return bin
}

// runProgram runs bin with args and returns its stdout.
func runProgram(t *testing.T, bin string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// generateHere makes req with prompt on a session of the artifact.
func generateHere(t *testing.T, artifact, prompt string, req aotlm.Request) string {
	t.Helper()
	m, err := aotlm.Open(artifact, aotlm.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession(0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	req.Prompt = prompt
	res, err := s.Generate(context.Background(), req, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Text == "" {
		t.Fatal("the reference generated no text")
	}
	return res.Text
}
