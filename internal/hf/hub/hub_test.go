package hub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aotlm/aotlm/internal/hf/hub/hubtest"
)

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// checkpointRepo is a small Hugging Face checkpoint plus files a model does
// not need.
func checkpointRepo() map[string][]byte {
	return map[string][]byte{
		"config.json":            []byte(`{"model_type":"llama"}`),
		"generation_config.json": []byte(`{"temperature":0.6}`),
		"tokenizer.json":         []byte(`{"model":{"type":"BPE"}}`),
		"tokenizer_config.json":  []byte(`{}`),
		"model.safetensors":      randomBytes(1<<20+123, 1),
		"README.md":              []byte("# a model\n"),
		".gitattributes":         []byte("*.safetensors filter=lfs\n"),
		"onnx/model.onnx":        randomBytes(1000, 2),
	}
}

func newClient(t *testing.T, hub *hubtest.Server, cache string, mod ...func(*Options)) *Client {
	t.Helper()
	o := Options{Endpoint: hub.URL(), CacheDir: cache}
	for _, m := range mod {
		m(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pull(t *testing.T, c *Client, ref string) (*Result, error) {
	t.Helper()
	r, err := ParseRef(ref)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return c.Pull(ctx, r)
}

// checkSnapshot asserts that every file of want is in the snapshot with its
// contents, as a relative symlink into blobs/ named by its etag.
func checkSnapshot(t *testing.T, res *Result, want map[string][]byte) {
	t.Helper()
	for p, data := range want {
		link := filepath.Join(res.Dir, filepath.FromSlash(p))
		target, err := os.Readlink(link)
		if err != nil {
			t.Fatalf("%s: not a symlink: %v", p, err)
		}
		etag := hubtest.GitBlobID(data)
		if hubtest.IsLFS(p) {
			etag = hubtest.SHA256(data)
		}
		wantTarget := strings.Repeat("../", strings.Count(p, "/")+2) + "blobs/" + etag
		if filepath.ToSlash(target) != wantTarget {
			t.Errorf("%s -> %s, want %s", p, target, wantTarget)
		}
		got, err := os.ReadFile(link)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("%s: contents differ (%v)", p, err)
		}
	}
}

func TestPullCacheLayout(t *testing.T) {
	hub := hubtest.New()
	defer hub.Close()
	files := checkpointRepo()
	repo := hub.AddRepo("test-org/tiny", files)
	cache := t.TempDir()
	c := newClient(t, hub, cache)
	res, err := pull(t, c, "test-org/tiny")
	if err != nil {
		t.Fatal(err)
	}
	wantDir := filepath.Join(cache, "models--test-org--tiny", "snapshots", repo.Commit)
	if res.Dir != wantDir || res.Model != wantDir || res.Commit != repo.Commit {
		t.Fatalf("result %+v, want snapshot %s", res, wantDir)
	}
	want := map[string][]byte{}
	for _, p := range []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"} {
		want[p] = files[p]
	}
	checkSnapshot(t, res, want)
	got, _ := snapshotFiles(res.Dir)
	if len(got) != len(want) {
		t.Errorf("snapshot holds %v; README, .gitattributes and onnx/ should be left out", got)
	}
	ref, err := os.ReadFile(filepath.Join(cache, "models--test-org--tiny", "refs", "main"))
	if err != nil || string(ref) != repo.Commit {
		t.Errorf("refs/main = %q (%v), want %s", ref, err, repo.Commit)
	}
	var total int64
	for _, b := range want {
		total += int64(len(b))
	}
	if res.Fetched != total {
		t.Errorf("fetched %d bytes, want %d", res.Fetched, total)
	}
	// a second pull transfers nothing
	res2, err := pull(t, c, "test-org/tiny@"+repo.Commit)
	if err != nil || res2.Fetched != 0 || hub.Requests("model.safetensors") != 1 {
		t.Errorf("second pull: %v, fetched %d, %d requests", err, res2.Fetched, hub.Requests("model.safetensors"))
	}
	list, err := List(cache)
	if err != nil || len(list) != 1 || list[0].Repo != "test-org/tiny" || list[0].Size != total || list[0].Refs["main"] != repo.Commit {
		t.Errorf("List = %+v, %v", list, err)
	}
	if ok, err := Remove(cache, "test-org/tiny"); !ok || err != nil {
		t.Fatalf("Remove: %v %v", ok, err)
	}
	if list, _ := List(cache); len(list) != 0 {
		t.Errorf("after Remove: %+v", list)
	}
}

// TestPullResumes cuts a download in the middle; the next pull asks for the
// rest with a Range request and fetches less than the whole file.
func TestPullResumes(t *testing.T) {
	hub := hubtest.New()
	defer hub.Close()
	files := checkpointRepo()
	hub.AddRepo("test-org/tiny", files)
	size := int64(len(files["model.safetensors"]))
	hub.CutNext("model.safetensors", size/3)
	cache := t.TempDir()
	c := newClient(t, hub, cache)
	if _, err := pull(t, c, "test-org/tiny"); err == nil || !strings.Contains(err.Error(), "pull again to resume") {
		t.Fatalf("cut download: err = %v", err)
	}
	inc := filepath.Join(cache, "models--test-org--tiny", "blobs", hubtest.SHA256(files["model.safetensors"])+".incomplete")
	st, err := os.Stat(inc)
	if err != nil || st.Size() == 0 || st.Size() > size/3 {
		t.Fatalf(".incomplete after the cut: %v, %v", st, err)
	}
	before := hub.Served("model.safetensors")
	res, err := pull(t, c, "test-org/tiny")
	if err != nil {
		t.Fatal(err)
	}
	second := hub.Served("model.safetensors") - before
	if second != size-st.Size() {
		t.Errorf("resumed pull fetched %d bytes, want the %d missing of %d", second, size-st.Size(), size)
	}
	checkSnapshot(t, res, map[string][]byte{"model.safetensors": files["model.safetensors"]})
	if _, err := os.Stat(inc); !os.IsNotExist(err) {
		t.Errorf(".incomplete left behind: %v", err)
	}
}

// TestPullRefusesCorruptBytes: a byte flipped in transit is caught by the
// hash; the file is fetched once more. Twice in a row is an error and
// nothing is left in the cache.
func TestPullRefusesCorruptBytes(t *testing.T) {
	for _, file := range []string{"model.safetensors", "config.json"} { // sha256 and git blob id
		t.Run(file, func(t *testing.T) {
			hub := hubtest.New()
			defer hub.Close()
			files := checkpointRepo()
			files["config.json"] = bytes.Repeat([]byte(`{"x":1}`), 100)
			hub.AddRepo("test-org/tiny", files)
			cache := t.TempDir()
			hub.CorruptNext(file, 1)
			res, err := pull(t, newClient(t, hub, cache), "test-org/tiny")
			if err != nil {
				t.Fatal(err)
			}
			if n := hub.Requests(file); n != 2 {
				t.Errorf("%d transfers, want 2 (the corrupt one and the retry)", n)
			}
			checkSnapshot(t, res, map[string][]byte{file: files[file]})

			cache = t.TempDir()
			hub.CorruptNext(file, 2)
			_, err = pull(t, newClient(t, hub, cache), "test-org/tiny")
			if !errors.Is(err, ErrHashMismatch) {
				t.Fatalf("corrupt twice: err = %v, want a hash mismatch", err)
			}
			etag := hubtest.GitBlobID(files[file])
			if hubtest.IsLFS(file) {
				etag = hubtest.SHA256(files[file])
			}
			blobs, _ := filepath.Glob(filepath.Join(cache, "models--test-org--tiny", "blobs", etag+"*"))
			if len(blobs) != 0 {
				t.Errorf("bad blob left in the cache: %v", blobs)
			}
		})
	}
}

// TestPullRefusesCorruptPartialFile: a partial download damaged on disk
// fails verification after resuming, and is fetched again from the start.
func TestPullRefusesCorruptPartialFile(t *testing.T) {
	hub := hubtest.New()
	defer hub.Close()
	files := checkpointRepo()
	hub.AddRepo("test-org/tiny", files)
	size := int64(len(files["model.safetensors"]))
	hub.CutNext("model.safetensors", size/2)
	cache := t.TempDir()
	c := newClient(t, hub, cache)
	if _, err := pull(t, c, "test-org/tiny"); err == nil {
		t.Fatal("cut download succeeded")
	}
	inc := filepath.Join(cache, "models--test-org--tiny", "blobs", hubtest.SHA256(files["model.safetensors"])+".incomplete")
	b, err := os.ReadFile(inc)
	if err != nil || len(b) < 100 {
		t.Fatalf("partial file: %d bytes, %v", len(b), err)
	}
	b[50] ^= 1
	os.WriteFile(inc, b, 0o644)
	res, err := pull(t, c, "test-org/tiny")
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, res, map[string][]byte{"model.safetensors": files["model.safetensors"]})
}

// TestParallelProcesses runs two processes (this test binary re-executed,
// see TestMain) that pull the same repository into one cache at once: both
// succeed, the weights are transferred once, and the blob is intact.
func TestParallelProcesses(t *testing.T) {
	hub := hubtest.New()
	defer hub.Close()
	hub.Delay = time.Millisecond // about 40 ms per MiB: the two pulls overlap
	files := checkpointRepo()
	hub.AddRepo("test-org/tiny", files)
	cache := t.TempDir()
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for i := 0; i < 2; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=1", "HUB_CHILD_ENDPOINT="+hub.URL(), "HUB_CHILD_CACHE="+cache)
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("process %d: %v\n%s", i, err, outs[i])
		}
	}
	size := int64(len(files["model.safetensors"]))
	if got := hub.Served("model.safetensors"); got != size {
		t.Errorf("weights transferred %d bytes for a %d-byte file: want one copy", got, size)
	}
	res, err := pull(t, newClient(t, hub, cache, func(o *Options) { o.Offline = true }), "test-org/tiny")
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, res, map[string][]byte{"model.safetensors": files["model.safetensors"], "config.json": files["config.json"]})
	blobs, _ := filepath.Glob(filepath.Join(cache, "models--test-org--tiny", "blobs", "*"))
	if len(blobs) != 5 {
		t.Errorf("blobs: %v, want 5 complete ones and nothing else", blobs)
	}
}

const childEnv = "AOTLM_HUB_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		c, err := New(Options{Endpoint: os.Getenv("HUB_CHILD_ENDPOINT"), CacheDir: os.Getenv("HUB_CHILD_CACHE")})
		if err == nil {
			_, err = c.Pull(context.Background(), Ref{Repo: "test-org/tiny"})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestOffline(t *testing.T) {
	hub := hubtest.New()
	files := checkpointRepo()
	repo := hub.AddRepo("test-org/tiny", files)
	cache := t.TempDir()
	offline := newClient(t, hub, cache, func(o *Options) { o.Offline = true })
	if _, err := pull(t, offline, "test-org/tiny"); !errors.Is(err, ErrNotCached) || !strings.Contains(err.Error(), "HF_HUB_OFFLINE") {
		t.Fatalf("offline, nothing cached: err = %v", err)
	}
	if hub.Requests("config.json") != 0 {
		t.Fatal("offline mode touched the network")
	}
	if _, err := pull(t, newClient(t, hub, cache), "test-org/tiny"); err != nil {
		t.Fatal(err)
	}
	hub.Close() // from here on the Hub is unreachable
	for _, c := range []*Client{offline, newClient(t, hub, cache)} {
		res, err := pull(t, c, "test-org/tiny")
		if err != nil {
			t.Fatal(err)
		}
		if !res.Cached || res.Commit != repo.Commit || len(res.Files) != 5 {
			t.Errorf("from the cache: %+v", res)
		}
	}
	if _, err := pull(t, offline, "test-org/tiny@v2"); !errors.Is(err, ErrNotCached) {
		t.Errorf("unknown revision offline: %v", err)
	}
}

func TestShardedSafetensors(t *testing.T) {
	hub := hubtest.New()
	defer hub.Close()
	hub.PageSize = 3 // the file list comes in several pages
	files := map[string][]byte{
		"config.json":                       []byte(`{}`),
		"tokenizer.json":                    []byte(`{}`),
		"model-00001-of-00003.safetensors":  randomBytes(70000, 3),
		"model-00002-of-00003.safetensors":  randomBytes(70000, 4),
		"model-00003-of-00003.safetensors":  randomBytes(1000, 5),
		"model.safetensors.index.json":      []byte(`{"weight_map":{}}`),
		"consolidated.safetensors":          randomBytes(5000, 6),
		"original/consolidated.00.pth":      randomBytes(100, 7),
		"tokenizer.model":                   randomBytes(300, 8),
		"special_tokens_map.json":           []byte(`{}`),
		"chat_template.jinja":               []byte(`{{ messages }}`),
		"figures/architecture.png":          randomBytes(100, 9),
		"model-00001-of-00003.safetensors2": []byte("not a weight"),
	}
	hub.AddRepo("test-org/sharded", files)
	res, err := pull(t, newClient(t, hub, t.TempDir(), func(o *Options) { o.Parallel = 3 }), "test-org/sharded")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"chat_template.jinja", "config.json", "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
		"model-00003-of-00003.safetensors", "model.safetensors.index.json", "special_tokens_map.json", "tokenizer.json", "tokenizer.model"}
	got := append([]string(nil), res.Files...)
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("pulled %v\nwant %v", got, want)
	}
	wantFiles := map[string][]byte{}
	for _, p := range want {
		wantFiles[p] = files[p]
	}
	checkSnapshot(t, res, wantFiles)
}

func TestGatedRepo(t *testing.T) {
	hub := hubtest.New()
	defer hub.Close()
	repo := hub.AddRepo("test-org/gated", checkpointRepo())
	repo.Gated = true
	repo.Granted["good-token"] = true
	cache := t.TempDir()
	_, err := pull(t, newClient(t, hub, cache), "test-org/gated")
	if !errors.Is(err, ErrGated) || !strings.Contains(err.Error(), hub.URL()+"/test-org/gated") || !strings.Contains(err.Error(), "HF_TOKEN") {
		t.Fatalf("no token: %v", err)
	}
	_, err = pull(t, newClient(t, hub, cache, func(o *Options) { o.Token = "other-token" }), "test-org/gated")
	if !errors.Is(err, ErrGated) || !strings.Contains(err.Error(), "accept the license") {
		t.Fatalf("token without access: %v", err)
	}
	if _, err := pull(t, newClient(t, hub, cache, func(o *Options) { o.Token = "good-token" }), "test-org/gated"); err != nil {
		t.Fatalf("granted token: %v", err)
	}
	c, _ := New(Options{Endpoint: DefaultEndpoint, CacheDir: cache})
	resp := &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{"X-Error-Code": {"GatedRepo"}}}
	err = c.statusError(resp, "org/x", "")
	if !strings.Contains(err.Error(), "https://huggingface.co/org/x") {
		t.Errorf("on the public Hub the license page is huggingface.co: %v", err)
	}
}

func TestNotFound(t *testing.T) {
	hub := hubtest.New()
	defer hub.Close()
	hub.AddRepo("test-org/tiny", checkpointRepo())
	cache := t.TempDir()
	if _, err := pull(t, newClient(t, hub, cache), "test-org/missing"); !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "does not exist or is private") {
		t.Errorf("unknown repo without a token: %v", err)
	}
	if _, err := pull(t, newClient(t, hub, cache, func(o *Options) { o.Token = "t" }), "test-org/missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown repo with a token: %v", err)
	}
	if _, err := pull(t, newClient(t, hub, cache), "test-org/tiny@no-such-branch"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "revision") {
		t.Errorf("unknown revision: %v", err)
	}
	if _, err := pull(t, newClient(t, hub, cache), "test-org/tiny:Q4_K_M"); err == nil || !strings.Contains(err.Error(), "has none") {
		t.Errorf("quant tag on a checkpoint: %v", err)
	}
}

// fullDisk is an .incomplete file on a device that fills after room bytes.
type fullDisk struct {
	*os.File
	room int64
}

func (f *fullDisk) Write(p []byte) (int, error) {
	off, _ := f.File.Seek(0, 1)
	if off+int64(len(p)) > f.room {
		n, _ := f.File.Write(p[:max(f.room-off, 0)])
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
	}
	return f.File.Write(p)
}

func TestDiskFull(t *testing.T) {
	hub := hubtest.New()
	defer hub.Close()
	files := checkpointRepo()
	hub.AddRepo("test-org/tiny", files)
	cache := t.TempDir()
	full := newClient(t, hub, cache, func(o *Options) {
		o.create = func(name string) (blobFile, error) {
			f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
			return &fullDisk{File: f, room: 200000}, err
		}
	})
	_, err := pull(t, full, "test-org/tiny")
	if !errors.Is(err, ErrDiskFull) {
		t.Fatalf("err = %v, want disk full", err)
	}
	blob := filepath.Join(cache, "models--test-org--tiny", "blobs", hubtest.SHA256(files["model.safetensors"]))
	if _, err := os.Stat(blob); !os.IsNotExist(err) {
		t.Fatalf("a blob was left as if complete: %v", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(blob), "..", "snapshots")); !os.IsNotExist(err) {
		t.Errorf("snapshot links made for an unfinished pull")
	}
	res, err := pull(t, newClient(t, hub, cache), "test-org/tiny")
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, res, map[string][]byte{"model.safetensors": files["model.safetensors"]})
}

func TestGGUFPick(t *testing.T) {
	hub := hubtest.New()
	defer hub.Close()
	files := map[string][]byte{
		"Model-Q4_K_M.gguf":                   randomBytes(3000, 1),
		"Model-Q4_K_S.gguf":                   randomBytes(3000, 2),
		"Model-IQ4_XS.gguf":                   randomBytes(3000, 3),
		"Model-Q8_0-00001-of-00002.gguf":      randomBytes(3000, 4),
		"Model-Q8_0-00002-of-00002.gguf":      randomBytes(3000, 5),
		"mmproj-Model-Q4_K_M.gguf":            randomBytes(3000, 6),
		"README.md":                           []byte("hi"),
		"BF16/Model-BF16-00001-of-00001.gguf": randomBytes(3000, 7),
	}
	repo := hub.AddRepo("test-org/model-GGUF", files)
	c := newClient(t, hub, t.TempDir())
	for _, tc := range []struct {
		ref  string
		want []string
		err  string
	}{
		{"test-org/model-GGUF:q4_k_m", []string{"Model-Q4_K_M.gguf"}, ""},
		{"test-org/model-GGUF", []string{"Model-Q4_K_M.gguf"}, ""},
		{"test-org/model-GGUF:IQ4_XS", []string{"Model-IQ4_XS.gguf"}, ""},
		{"test-org/model-GGUF:Q8_0", []string{"Model-Q8_0-00001-of-00002.gguf", "Model-Q8_0-00002-of-00002.gguf"}, ""},
		{"test-org/model-GGUF:bf16", []string{"BF16/Model-BF16-00001-of-00001.gguf"}, ""},
		{"test-org/model-GGUF:Q4_K", nil, "no GGUF file matches"},
		{"test-org/model-GGUF:Q5_0", nil, "Model-Q4_K_S.gguf"},
	} {
		res, err := pull(t, c, tc.ref)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err = %v, want %q", tc.ref, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.ref, err)
			continue
		}
		if strings.Join(res.Files, " ") != strings.Join(tc.want, " ") || res.Model != filepath.Join(res.Dir, filepath.FromSlash(tc.want[0])) {
			t.Errorf("%s: files %v model %s, want %v", tc.ref, res.Files, res.Model, tc.want)
		}
	}
	// a tag that matches two files is refused with the list
	_, _, err := Select([]File{{Path: "a-Q4_0.gguf"}, {Path: "b-Q4_0.gguf"}}, "q4_0")
	if err == nil || !strings.Contains(err.Error(), "a-Q4_0.gguf") || !strings.Contains(err.Error(), "b-Q4_0.gguf") {
		t.Errorf("ambiguous tag: %v", err)
	}
	// without a tag and without Q4_K_M the choice is refused
	_, _, err = Select([]File{{Path: "a-Q8_0.gguf"}, {Path: "a-F16.gguf"}}, "")
	if err == nil || !strings.Contains(err.Error(), "org/name:TAG") {
		t.Errorf("no default: %v", err)
	}
	// offline, the cached snapshot answers the same tags
	off := newClient(t, hub, c.CacheDir(), func(o *Options) { o.Offline = true })
	res, err := pull(t, off, "test-org/model-GGUF:IQ4_XS")
	if err != nil || res.Commit != repo.Commit || filepath.Base(res.Model) != "Model-IQ4_XS.gguf" {
		t.Errorf("offline pick: %+v %v", res, err)
	}
}

func TestParseRef(t *testing.T) {
	for in, want := range map[string]Ref{
		"org/name":                       {Repo: "org/name"},
		"org/name@v1.0":                  {Repo: "org/name", Revision: "v1.0"},
		"unsloth/Qwen3-0.6B-GGUF:Q4_K_M": {Repo: "unsloth/Qwen3-0.6B-GGUF", Quant: "Q4_K_M"},
		"a/b@refs/pr/1:q8_0":             {Repo: "a/b", Revision: "refs/pr/1", Quant: "q8_0"},
	} {
		got, err := ParseRef(in)
		if err != nil || got != want || got.String() != in {
			t.Errorf("ParseRef(%q) = %+v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"name", "a/b/c", "../x", "a/..", "/abs/path", "a/b@", "a/b:", "a/b@x/../y", "./model.gguf", "models/stories.gguf", "out/model.aot"} {
		if _, err := ParseRef(bad); err == nil {
			t.Errorf("ParseRef(%q) accepted", bad)
		}
	}
}

// TestSelectSentenceTransformers: a sentence-transformers checkpoint
// (EmbeddingGemma's layout) brings its modules.json and its module
// folders' config.json and model.safetensors; other folders and files
// stay behind, and without modules.json no module folder is taken.
func TestSelectSentenceTransformers(t *testing.T) {
	files := []File{{Path: "config.json"}, {Path: "model.safetensors"}, {Path: "tokenizer.json"}, {Path: "modules.json"},
		{Path: "1_Pooling/config.json"}, {Path: "2_Dense/config.json"}, {Path: "2_Dense/model.safetensors"},
		{Path: "3_Dense/model.safetensors"}, {Path: "2_Dense/pytorch_model.bin"}, {Path: "onnx/model.onnx"},
		{Path: "README.md"}, {Path: "config_sentence_transformers.json"}}
	pick, _, err := Select(files, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range pick {
		got = append(got, f.Path)
	}
	sort.Strings(got)
	want := []string{"1_Pooling/config.json", "2_Dense/config.json", "2_Dense/model.safetensors", "3_Dense/model.safetensors",
		"config.json", "model.safetensors", "modules.json", "tokenizer.json"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("picked %v, want %v", got, want)
	}
	pick, _, err = Select(files[:3], "")
	if err != nil || len(pick) != 3 {
		t.Errorf("without modules.json: %v, %v", pick, err)
	}
}
