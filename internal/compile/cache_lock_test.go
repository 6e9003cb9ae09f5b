package compile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aotlm/aotlm/internal/output"
	"github.com/aotlm/aotlm/internal/testutil"
)

// TestCacheWaitsForAnotherWriter: while another writer holds a cache
// entry's lock, Cached waits for it and then uses its artifact rather than
// failing or compiling the entry a second time; when that writer leaves
// no artifact, Cached says so. CompileFile to a locked output is refused.
func TestCacheWaitsForAnotherWriter(t *testing.T) {
	src := testutil.Path(t, "models/stories260K/stories260K.gguf")
	t.Setenv(CacheEnv, t.TempDir())
	opts := Options{ARLens: []int{4}, Ctx: 32}
	out, err := CachePath(src, opts)
	if err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(t.TempDir(), "ready.aot")
	if err := CompileFile(src, ready, opts); err != nil {
		t.Fatal(err)
	}
	for _, leaves := range []bool{true, false} {
		os.Remove(out)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		release, err := output.Lock(out)
		if err != nil {
			t.Fatal(err)
		}
		if err := CompileFile(src, out, opts); !errors.Is(err, output.ErrLocked) {
			t.Errorf("CompileFile to a locked output: %v", err)
		}
		done := make(chan error, 1)
		go func() {
			_, err := Cached(src, opts, nil)
			done <- err
		}()
		select {
		case err := <-done:
			t.Fatalf("Cached did not wait for the lock: %v", err)
		case <-time.After(300 * time.Millisecond):
		}
		if leaves {
			b, _ := os.ReadFile(ready)
			if err := os.WriteFile(out, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		mtime := time.Time{}
		if st, err := os.Stat(out); err == nil {
			mtime = st.ModTime()
		}
		release()
		select {
		case err := <-done:
			if leaves && err != nil {
				t.Errorf("after the other writer: %v", err)
			}
			if !leaves && (err == nil || !strings.Contains(err.Error(), "other process")) {
				t.Errorf("the other writer left nothing: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Cached still waits after the lock was released")
		}
		if st, err := os.Stat(out); leaves && (err != nil || !st.ModTime().Equal(mtime)) {
			t.Errorf("the entry was compiled again: %v", err)
		}
	}
}
