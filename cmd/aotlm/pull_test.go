package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/hf/hub/hubtest"
	"github.com/aotlm/aotlm/internal/testutil"
)

// hubEnv points the Hub settings at a fake Hub and a fresh cache.
func hubEnv(t *testing.T, hub *hubtest.Server) string {
	home := t.TempDir()
	t.Setenv("HF_ENDPOINT", hub.URL())
	t.Setenv("HF_HOME", home)
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv(compile.CacheEnv, t.TempDir())
	return filepath.Join(home, "hub")
}

// TestRunFromHub: `run org/name` pulls the model from a fake Hub and prints
// the same greedy story as the local file; list shows the pulled model and
// the compiled artifact, offline mode reuses them, rm removes them.
func TestRunFromHub(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	hub := hubtest.New()
	defer hub.Close()
	repo := hub.AddRepo("test-org/stories260K", map[string][]byte{"stories260K.gguf": data, "README.md": []byte("# stories\n")})
	hubDir := hubEnv(t, hub)

	gen := []string{"-p", "Once upon a time", "-n", "32", "--temp", "0"}
	code, local, errs := runCLI(t, append([]string{"run", "-m", src}, gen...)...)
	if code != 0 || !strings.HasPrefix(local, "Once upon a time") || len(local) < 40 {
		t.Fatalf("local run: exit %d, %q, %s", code, local, errs)
	}
	code, pulled, errs := runCLI(t, append([]string{"run", "test-org/stories260K"}, gen...)...)
	if code != 0 || pulled != local {
		t.Fatalf("run from the Hub: exit %d (%s)\n got %q\nwant %q", code, errs, pulled, local)
	}
	if !strings.Contains(errs, "fetched") {
		t.Errorf("no word of the download on stderr: %q", errs)
	}
	snap := filepath.Join(hubDir, "models--test-org--stories260K", "snapshots", repo.Commit, "stories260K.gguf")
	if target, err := os.Readlink(snap); err != nil || target != "../../blobs/"+hubtest.SHA256(data) {
		t.Fatalf("snapshot link %s -> %q (%v)", snap, target, err)
	}

	t.Setenv("HF_HUB_OFFLINE", "1")
	code, offline, errs := runCLI(t, append([]string{"run", "-m", "test-org/stories260K"}, gen...)...)
	if code != 0 || offline != local || hub.Requests("stories260K.gguf") != 1 {
		t.Fatalf("offline run: exit %d (%s), %q, %d transfers", code, errs, offline, hub.Requests("stories260K.gguf"))
	}
	code, _, errs = runCLI(t, "pull", "test-org/other")
	if code != 1 || !strings.Contains(errs, "offline") {
		t.Errorf("offline pull of an uncached repo: exit %d, %s", code, errs)
	}
	t.Setenv("HF_HUB_OFFLINE", "")

	code, out, errs := runCLI(t, "list", "--json")
	var list struct {
		Models []struct {
			Repo string
			Size int64
		}
		Artifacts []compile.CachedArtifact
	}
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("list: exit %d, %s %s", code, out, errs)
	}
	if len(list.Models) != 1 || list.Models[0].Repo != "test-org/stories260K" || list.Models[0].Size != int64(len(data)) || len(list.Artifacts) != 2 {
		t.Fatalf("list: %+v", list)
	}
	code, table, _ := runCLI(t, "list")
	if code != 0 || !strings.Contains(table, "test-org/stories260K") || !strings.Contains(table, list.Artifacts[0].Name) {
		t.Errorf("list table:\n%s", table)
	}
	// one artifact for the local file and one for the snapshot
	if code, _, errs := runCLI(t, "rm", "test-org/stories260K", list.Artifacts[0].Name); code != 0 {
		t.Fatalf("rm: %s", errs)
	}
	if code, _, errs := runCLI(t, "rm", "--artifacts"); code != 0 {
		t.Fatalf("rm --artifacts: %s", errs)
	}
	code, out, _ = runCLI(t, "list", "--json")
	list.Models, list.Artifacts = nil, nil
	if code != 0 || json.Unmarshal([]byte(out), &list) != nil || len(list.Models) != 0 || len(list.Artifacts) != 0 {
		t.Errorf("after rm: %s", out)
	}
	if code, _, errs := runCLI(t, "rm", "test-org/stories260K"); code != 1 || !strings.Contains(errs, "not in the cache") {
		t.Errorf("rm of a missing model: exit %d, %s", code, errs)
	}
}

func TestPullErrors(t *testing.T) {
	hub := hubtest.New()
	defer hub.Close()
	r := hub.AddRepo("test-org/gated", map[string][]byte{"config.json": []byte("{}"), "model.safetensors": []byte("12345678")})
	r.Gated = true
	hubEnv(t, hub)
	code, _, errs := runCLI(t, "pull", "test-org/gated")
	if code != 1 || !strings.Contains(errs, "accept its license at "+hub.URL()+"/test-org/gated") {
		t.Errorf("gated: exit %d, %s", code, errs)
	}
	code, _, errs = runCLI(t, "run", "no-such/model", "-p", "x")
	if code != 1 || !strings.Contains(errs, "does not exist or is private") {
		t.Errorf("unknown repo: exit %d, %s", code, errs)
	}
	// a path that exists wins over a repository of the same shape
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755)
	t.Chdir(dir)
	if got, err := resolveModelArg("a/b", os.Stderr); err != nil || got != "a/b" {
		t.Errorf("existing path: %q %v", got, err)
	}
}
