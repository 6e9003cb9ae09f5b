package serve

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/aotlm/aotlm/internal/testutil"
)

// clientsDir holds the npm test project of the official clients.
const clientsDir = "testdata/clients"

// nodeClients finds node and the installed npm clients; the test fails
// without them under CI=true (scripts/test.sh installs both).
func nodeClients(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if testutil.InCI() {
			t.Fatal("no node binary (CI=true, so this is a failure): apt-get install nodejs npm")
		}
		t.Skip("no node binary: apt-get install nodejs npm to run the official client tests")
	}
	for _, pkg := range []string{"@anthropic-ai/sdk", "ollama", "openai"} {
		if _, err := os.Stat(filepath.Join(clientsDir, "node_modules", pkg, "package.json")); err != nil {
			if testutil.InCI() {
				t.Fatalf("the npm package %s is not installed (CI=true, so this is a failure): run npm ci in serve/%s", pkg, clientsDir)
			}
			t.Skipf("the npm package %s is not installed: run npm ci in serve/%s to run the official client tests", pkg, clientsDir)
		}
	}
	return node
}

var (
	tapTests = regexp.MustCompile(`(?m)^# tests (\d+)$`)
	tapPass  = regexp.MustCompile(`(?m)^# pass (\d+)$`)
)

// TestOfficialClients drives a server with the official npm clients
// (@anthropic-ai/sdk, ollama, openai) under node --test: each file's
// tests must all pass, and there must be as many as the file declares
// (so a file that loads no tests fails).
func TestOfficialClients(t *testing.T) {
	node := nodeClients(t)
	ts := newTestServer(t, Options{Parallel: 2, APIKey: "test-key"})
	// the same model with a template that opens the thinking
	m := openStories(t)
	if err := m.SetChatTemplate("thinking", thinkingTemplate); err != nil {
		t.Fatal(err)
	}
	think := newTestServerFor(t, m, Options{APIKey: "test-key"})
	em := openStoriesEmbed(t)
	embed := newTestServerFor(t, em, Options{APIKey: "test-key", ModelID: "embed"})
	want, err := json.Marshal(directEmbed(t, em, "Once upon a time"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		file string
		min  int // the tests the file holds
	}{
		{"anthropic.test.mjs", 7},
		{"embeddings.test.mjs", 2},
		{"ollama.test.mjs", 7},
		{"openai.test.mjs", 7},
		{"reasoning.test.mjs", 3},
	} {
		t.Run(c.file, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=tap", c.file)
			cmd.Dir = clientsDir
			cmd.Env = append(os.Environ(), "AOTLM_URL="+ts.http.URL, "AOTLM_THINK_URL="+think.http.URL, "AOTLM_MODEL=stories", "AOTLM_KEY=test-key",
				"AOTLM_EMBED_URL="+embed.http.URL, "AOTLM_EMBED_MODEL=embed", "AOTLM_EMBED_WANT="+string(want))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("node --test %s: %v\n%s", c.file, err, out)
			}
			tests, pass := tapCount(tapTests, out), tapCount(tapPass, out)
			if tests < c.min || pass != tests {
				t.Fatalf("node --test %s: %d of %d tests passed, want all of at least %d\n%s", c.file, pass, tests, c.min, out)
			}
			t.Logf("%s: %d tests passed", c.file, pass)
		})
	}
}

func tapCount(re *regexp.Regexp, out []byte) int {
	m := re.FindSubmatch(out)
	if m == nil {
		return -1
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}
