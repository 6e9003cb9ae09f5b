package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestTuneStoresTheChoice: `aotlm tune` stores its choice in the cache
// folder, where a load finds it.
func TestTuneStoresTheChoice(t *testing.T) {
	cache := t.TempDir()
	t.Setenv("AOTLM_CACHE", cache)
	code, out, errs := runCLI(t, "tune", "--json")
	if code != 0 {
		t.Fatalf("tune: exit %d: %s", code, errs)
	}
	var res struct {
		Walk   string `json:"walk"`
		Stored string `json:"stored"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("tune --json: %v: %q", err, out)
	}
	if res.Walk == "" {
		t.Errorf("no walk in %q", out)
	}
	if res.Walk == "fixed" {
		return // one walk: nothing to store
	}
	if want := filepath.Join(cache, "kernel-tune.json"); res.Stored != want {
		t.Errorf("stored in %q, want %q", res.Stored, want)
	}
	if _, err := os.Stat(filepath.Join(cache, "kernel-tune.json")); err != nil {
		t.Errorf("no stored choice: %v", err)
	}
}
