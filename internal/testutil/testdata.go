package testutil

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// EnvVar names the environment variable that overrides the test data folder.
const EnvVar = "AOTLM_TESTDATA"

// Dir returns the test data folder: $AOTLM_TESTDATA if set, else
// <repository root>/../shared/testdata.
func Dir() string {
	if d := os.Getenv(EnvVar); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), "..", "shared", "testdata")
}

// RepoRoot returns the repository root (the folder holding go.mod).
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "."
	}
	// this file is <root>/internal/testutil/testdata.go
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// InCI reports whether the tests run under CI (CI=true).
func InCI() bool {
	v := os.Getenv("CI")
	return v == "true" || v == "1"
}

// Path returns the path of rel inside the test data folder. If the file does
// not exist, the test fails under CI and is skipped elsewhere, naming the file.
func Path(t testing.TB, rel string) string {
	t.Helper()
	p := filepath.Join(Dir(), rel)
	if _, err := os.Stat(p); err != nil {
		if InCI() {
			t.Fatalf("test data %s missing (CI=true, so this is a failure): %v", rel, err)
		}
		t.Skipf("test data %s not found (set %s to the shared testdata folder): %v", rel, EnvVar, err)
	}
	return p
}

// ReadFile reads rel from the test data folder with Path's skip/fail rule.
func ReadFile(t testing.TB, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(Path(t, rel))
	if err != nil {
		t.Fatalf("reading test data %s: %v", rel, err)
	}
	return b
}

// CopyFiles copies the named files of folder from into folder to, which
// must exist; a fixture folder is read-only test data, so a test that
// needs it with files left out runs on such a copy.
func CopyFiles(t testing.TB, from, to string, names ...string) {
	t.Helper()
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(from, name))
		if err == nil {
			err = os.WriteFile(filepath.Join(to, name), b, 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
