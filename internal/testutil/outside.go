package testutil

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// GoOutside writes files (slash-separated names to contents) into a new
// module that requires this one, replaced by the checkout, as a user's
// module would, so that only the public packages are in reach; then runs
// the go command with args there and returns its combined output. The
// module's go version and go.sum are this repository's.
func GoOutside(t testing.TB, files map[string]string, args ...string) (string, error) {
	t.Helper()
	root := RepoRoot()
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := ""
	for _, l := range strings.Split(string(gomod), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "go "); ok {
			goVersion = strings.TrimSpace(v)
			break
		}
	}
	if goVersion == "" {
		t.Fatal("go.mod has no go line")
	}
	dir := t.TempDir()
	all := maps.Clone(files)
	all["go.mod"] = fmt.Sprintf("module example.com/outside\n\ngo %s\n\nrequire github.com/aotlm/aotlm v0.0.0\n\nreplace github.com/aotlm/aotlm => %s\n", goVersion, root)
	if sum, err := os.ReadFile(filepath.Join(root, "go.sum")); err == nil {
		all["go.sum"] = string(sum)
	}
	for name, text := range all {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	return out.String(), err
}
