package serve

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aotlm/aotlm"
	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

// longModel compiles wp-llama (a tiny Llama with a tokenizer) with its
// trained context raised to 4096 positions, for a chat of thousands of
// tokens (the replies' quality does not matter here), and returns the
// artifact's path.
func longModel(t *testing.T) string {
	t.Helper()
	src := testutil.Path(t, "models/wp-llama")
	dir := t.TempDir()
	testutil.CopyFiles(t, src, dir, "model.safetensors", "tokenizer.model")
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg = regexp.MustCompile(`"max_position_embeddings":\s*\d+`).ReplaceAll(cfg, []byte(`"max_position_embeddings": 4096`))
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "wp.aot")
	if err := compile.CompileFile(dir, out, compile.Options{ARLens: []int{64}, Ctx: 2560}); err != nil {
		t.Fatal(err)
	}
	return out
}

func openLong(t *testing.T, path string) *aotlm.Model {
	t.Helper()
	m, err := aotlm.Open(path, aotlm.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetChatTemplate("chatml", chatML); err != nil {
		t.Fatal(err)
	}
	return m
}

// chatUsage posts a chat and returns its usage and timings.
func chatUsage(t *testing.T, ts *testServer, msgs []map[string]string) (*usage, *timings, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"messages": msgs, "max_tokens": 8, "temperature": 0})
	resp, b := send(t, ts, http.MethodPost, "/v1/chat/completions", string(body), map[string]string{"Content-Type": "application/json"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat: status %d: %s", resp.StatusCode, b)
	}
	var r chatResponse
	if err := json.Unmarshal([]byte(b), &r); err != nil || r.Usage == nil || r.Timings == nil {
		t.Fatalf("chat answer %s: %v", b, err)
	}
	return r.Usage, r.Timings, *r.Choices[0].Message.Content
}

// TestSlotSaveRestore: a chat of about 2,000 tokens is saved with POST
// /slots/0?action=save, the server (and its model) closed and started
// again, the slot restored: the next turn of the chat prefills only its
// new tokens. Bad file names, missing files, another client's slot and a
// server without --slot-save-path are refused.
func TestSlotSaveRestore(t *testing.T) {
	path := longModel(t)
	book, err := os.ReadFile(testutil.Path(t, "text/war-and-peace.txt"))
	if err != nil {
		t.Fatal(err)
	}
	saveDir := t.TempDir()
	// 3,400 characters of the book are about 2,000 tokens of tok512
	long := string(book[20000:23400])
	msgs := []map[string]string{{"role": "system", "content": "You continue the book."}, {"role": "user", "content": long}}

	m1 := openLong(t, path)
	ts1 := newTestServerFor(t, m1, Options{Parallel: 1, SlotSaveDir: saveDir})
	u1, _, reply := chatUsage(t, ts1, msgs)
	if u1.PromptTokens < 1800 || u1.PromptTokens > 2400 {
		t.Fatalf("the first turn is %d tokens; want about 2,000", u1.PromptTokens)
	}
	slot := func(ts *testServer, action, body string, header map[string]string) (int, map[string]any) {
		t.Helper()
		resp, b := send(t, ts, http.MethodPost, "/slots/0?action="+action, body, header)
		var out map[string]any
		json.Unmarshal([]byte(b), &out)
		return resp.StatusCode, out
	}
	// another client may not save this conversation
	if code, _ := slot(ts1, "save", `{"filename": "chat.bin"}`, map[string]string{"Authorization": "Bearer someone-else"}); code != http.StatusForbidden {
		t.Errorf("saving another client's slot: status %d, want 403", code)
	}
	code, saved := slot(ts1, "save", `{"filename": "chat.bin"}`, nil)
	if code != http.StatusOK || saved["n_saved"].(float64) < float64(u1.PromptTokens) {
		t.Fatalf("save: status %d, %v", code, saved)
	}
	for _, bad := range []string{"../chat.bin", "a/b", ".hidden", ""} {
		if code, _ := slot(ts1, "save", `{"filename": "`+bad+`"}`, nil); code != http.StatusBadRequest {
			t.Errorf("save as %q: status %d, want 400", bad, code)
		}
	}
	if code, _ := slot(ts1, "launch", `{}`, nil); code != http.StatusBadRequest {
		t.Errorf("an unknown action: status %d, want 400", code)
	}
	// the restart
	ts1.http.Close()
	ts1.srv.Close()
	m1.Close()
	if _, err := os.Stat(filepath.Join(saveDir, "chat.bin")); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(saveDir)
	if len(entries) != 1 {
		t.Errorf("the save folder holds %d files; want the one saved (no temporary left)", len(entries))
	}

	m2 := openLong(t, path)
	defer m2.Close()
	ts2 := newTestServerFor(t, m2, Options{Parallel: 1, SlotSaveDir: saveDir})
	if code, _ := slot(ts2, "restore", `{"filename": "missing.bin"}`, nil); code != http.StatusNotFound {
		t.Errorf("restoring a missing file: status %d, want 404", code)
	}
	code, restored := slot(ts2, "restore", `{"filename": "chat.bin"}`, nil)
	if code != http.StatusOK || restored["n_restored"] != saved["n_saved"] {
		t.Fatalf("restore: status %d, %v (saved %v)", code, restored, saved["n_saved"])
	}
	next := append(msgs, map[string]string{"role": "assistant", "content": reply}, map[string]string{"role": "user", "content": "Go on."})
	u2, tm, _ := chatUsage(t, ts2, next)
	added := u2.PromptTokens - u1.PromptTokens
	if u2.PromptDetails.CachedTokens < u1.PromptTokens || tm.PromptN != u2.PromptTokens-u2.PromptDetails.CachedTokens || tm.PromptN > added {
		t.Errorf("after the restore the next turn of %d tokens reused %d and prefilled %d; want the %d of the first turn reused and at most the %d added prefilled",
			u2.PromptTokens, u2.PromptDetails.CachedTokens, tm.PromptN, u1.PromptTokens, added)
	}
	t.Logf("saved %v tokens in %v bytes; after the restart the next turn of %d tokens prefilled %d (%d cached)",
		saved["n_saved"], saved["n_written"], u2.PromptTokens, tm.PromptN, u2.PromptDetails.CachedTokens)

	// a damaged file is refused and leaves the slot empty
	if err := os.WriteFile(filepath.Join(saveDir, "bad.bin"), []byte("AOTLMSES junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := slot(ts2, "restore", `{"filename": "bad.bin"}`, nil); code != http.StatusBadRequest || !strings.Contains(fmtAny(out), "loading a session") {
		t.Errorf("restoring a damaged file: status %d, %v", code, out)
	}
	if n := len(ts2.srv.pool.slots[0].s.History()); n != 0 {
		t.Errorf("the slot holds %d ids after a refused restore", n)
	}
	// without --slot-save-path
	ts3 := newTestServer(t, Options{})
	if code, _ := slot(ts3, "save", `{"filename": "chat.bin"}`, nil); code != http.StatusBadRequest {
		t.Errorf("save without a save folder: status %d, want 400", code)
	}
	if code, _ := slot(ts3, "erase", ``, nil); code != http.StatusOK {
		t.Errorf("erase: status %d", code)
	}
}

func fmtAny(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestPromptCache: with PromptCacheBytes, a long conversation whose only
// session is taken by another one is stashed, and its next turn loads it
// back and prefills only what it adds; without it, the turn prefills all.
func TestPromptCache(t *testing.T) {
	path := longModel(t)
	book, err := os.ReadFile(testutil.Path(t, "text/war-and-peace.txt"))
	if err != nil {
		t.Fatal(err)
	}
	m := openLong(t, path)
	defer m.Close()
	a := []map[string]string{{"role": "user", "content": string(book[30000:32000])}}
	b := []map[string]string{{"role": "user", "content": string(book[40000:41000])}}
	for _, budget := range []int64{0, 64 << 20} {
		ts := newTestServerFor(t, m, Options{Parallel: 1, PromptCacheBytes: budget})
		u1, _, reply := chatUsage(t, ts, a)
		chatUsage(t, ts, b) // takes the one session
		next := append(append([]map[string]string{}, a...), map[string]string{"role": "assistant", "content": reply},
			map[string]string{"role": "user", "content": "Go on."})
		u2, tm, _ := chatUsage(t, ts, next)
		if budget == 0 && u2.PromptDetails.CachedTokens >= u1.PromptTokens {
			t.Errorf("without a prompt cache the turn reused %d tokens", u2.PromptDetails.CachedTokens)
		}
		if budget > 0 && (u2.PromptDetails.CachedTokens < u1.PromptTokens || tm.PromptN > u2.PromptTokens-u1.PromptTokens) {
			t.Errorf("with a prompt cache the turn of %d tokens reused %d and prefilled %d; want the first turn's %d reused",
				u2.PromptTokens, u2.PromptDetails.CachedTokens, tm.PromptN, u1.PromptTokens)
		}
		used, n := ts.srv.cache.size()
		t.Logf("budget %d: the next turn of %d tokens prefilled %d; the cache holds %d entries, %d bytes", budget, u2.PromptTokens, tm.PromptN, n, used)
	}
}
