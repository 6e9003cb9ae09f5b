package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParsePairs(t *testing.T) {
	got, err := ParsePairs([]string{"512,128", " 64 , 32 "})
	if err != nil || !slices.Equal(got, [][2]int{{512, 128}, {64, 32}}) {
		t.Fatalf("ParsePairs = %v, %v", got, err)
	}
	for _, bad := range []string{"512", "a,1", "1,b", ""} {
		if _, err := ParsePairs([]string{bad}); err == nil || !strings.Contains(err.Error(), "is not PROMPT,GEN") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestStartCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	stop, err := StartCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("profile: %v", err)
	}
	if _, err := StartCPUProfile(filepath.Join(t.TempDir(), "missing", "cpu.prof")); err == nil {
		t.Fatal("a profile in a missing folder gave no error")
	}
}
