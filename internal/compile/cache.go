package compile

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aotlm/aotlm/internal/artifact"
	"github.com/aotlm/aotlm/internal/output"
	"github.com/aotlm/aotlm/internal/plan"
)

// CacheEnv names the environment variable that overrides the folder of
// compiled artifacts (default: the user cache folder's "aotlm").
const CacheEnv = "AOTLM_CACHE"

// CacheDir returns the folder compiled artifacts are cached in.
func CacheDir() (string, error) {
	if d := os.Getenv(CacheEnv); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("no cache folder (set %s): %w", CacheEnv, err)
	}
	return filepath.Join(d, "aotlm"), nil
}

// Cached returns a compiled artifact of the model at path, compiling it
// into the cache the first time (as `ollama run` pulls once). The cache
// key covers the model's files (names, sizes, modification and change
// times, inodes: a file replaced in place changes its change time), the
// tokenizer, the compile options and the artifact format, so a changed
// model or option compiles anew. A cached artifact that no longer opens
// (truncated, damaged) is compiled again. log receives one line when
// compiling.
func Cached(path string, opts Options, log io.Writer) (string, error) {
	if artifact.IsArtifact(path) {
		return path, nil
	}
	out, err := CachePath(path, opts)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(out); err == nil {
		a, err := artifact.Open(out, artifact.OpenOptions{})
		if err == nil {
			var m plan.Manifest
			merr := a.Manifest(&m)
			a.Close()
			if merr != nil || !lacksMTP(&m) {
				return out, nil
			}
			// compiled before the draft head was: compile it with it
			if log != nil {
				fmt.Fprintf(log, "the cached artifact %s lacks the model's multi-token-prediction head: compiling again\n", out)
			}
			if err := os.Remove(out); err != nil {
				return "", fmt.Errorf("cache: %w", err)
			}
		} else if err := Evict(out, err, log); err != nil {
			return "", err
		}
	}
	err = CompileInto(path, out, opts, log)
	if errors.Is(err, output.ErrLocked) {
		// another process compiles the same entry: wait for it and use
		// its artifact
		if log != nil {
			fmt.Fprintf(log, "waiting for another process compiling %s\n", out)
		}
		for output.Locked(out) {
			time.Sleep(100 * time.Millisecond)
		}
		a, oerr := artifact.Open(out, artifact.OpenOptions{})
		if oerr != nil {
			return "", fmt.Errorf("cache: the other process's compile of %s failed: %w", out, oerr)
		}
		a.Close()
		return out, nil
	}
	if err != nil {
		return "", err
	}
	return out, nil
}

// CachePath returns the file the cache keeps the model at path in once
// compiled with opts (see Cached for what the key covers); the file may
// not exist yet.
func CachePath(path string, opts Options) (string, error) {
	key, err := cacheKey(path, opts)
	if err != nil {
		return "", err
	}
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, key+".aot"), nil
}

// Evict removes the cached artifact out, which did not open (why), saying
// so on log (when not nil) before it is compiled again.
func Evict(out string, why error, log io.Writer) error {
	if log != nil {
		fmt.Fprintf(log, "the cached artifact %s does not open (%v): compiling again\n", out, why)
	}
	if err := os.Remove(out); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}

// CompileInto compiles the model at path into the cache file out (from
// CachePath), creating the cache folder, with one line on log (when not
// nil).
func CompileInto(path, out string, opts Options, log io.Writer) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	if log != nil {
		fmt.Fprintf(log, "compiling %s into %s (once)\n", path, out)
	}
	// the artifact writer builds a temp file and renames it into place
	return CompileFile(path, out, opts)
}

func cacheKey(path string, opts Options) (string, error) {
	h := sha256.New()
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(h, "format=%s\npath=%s\n", plan.ManifestFormat, abs)
	if err := statInto(h, abs); err != nil {
		return "", fmt.Errorf("model: %w", err)
	}
	if opts.Tokenizer != "" {
		fmt.Fprintf(h, "tokenizer=%s\n", opts.Tokenizer)
		if err := statInto(h, opts.Tokenizer); err != nil {
			return "", fmt.Errorf("tokenizer: %w", err)
		}
	}
	lens := slices.Clone(opts.ARLens)
	slices.Sort(lens)
	gw := opts.GGUFWeights
	if gw == "" {
		gw = GGUFNative
	}
	fmt.Fprintf(h, "ar=%v ctx=%d clamp=%v kv=%s calib=%s float-act=%v gguf=%s\n", lens, opts.Ctx, opts.ClampCtx, opts.KV, opts.CalibText, opts.FloatActivations, gw)
	if plan.IsKVQ4(opts.KV) {
		// a 4-bit cache's centers come from CenterCalibTokens tokens
		fmt.Fprintf(h, "kv-centers=%d\n", CenterCalibTokens)
	}
	// an encoder compiled with the default storage is that storage's
	fmt.Fprintf(h, "vision-default=%s\n", DefaultVisionWeights)
	if opts.MMProj != "" || opts.VisionWeights != "" {
		fmt.Fprintf(h, "mmproj=%s vision=%s\n", opts.MMProj, opts.VisionWeights)
		if opts.MMProj != "" {
			if err := statInto(h, opts.MMProj); err != nil {
				return "", fmt.Errorf("mmproj: %w", err)
			}
		}
	}
	if opts.VisionBuckets != "" {
		fmt.Fprintf(h, "vision-buckets=%s\n", opts.VisionBuckets)
	}
	if opts.VisionLlamaCpp {
		fmt.Fprintf(h, "vision-llama-cpp\n")
	}
	for _, sp := range opts.Carry {
		fmt.Fprintf(h, "carry=%s path=%s scale=%g\n", sp.Name, sp.Path, sp.Scale)
		if err := statInto(h, sp.Path); err != nil {
			return "", fmt.Errorf("lora: %w", err)
		}
	}
	for _, sp := range opts.LoRA {
		fmt.Fprintf(h, "lora=%s scale=%g\n", sp.Path, sp.Scale)
		if err := statInto(h, sp.Path); err != nil {
			return "", fmt.Errorf("lora: %w", err)
		}
	}
	if opts.CalibText != "" {
		if err := statInto(h, opts.CalibText); err != nil {
			return "", fmt.Errorf("calibration text: %w", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:24], nil
}

// statInto hashes the name, size and modification time of path, or of
// every file directly inside it when it is a folder, and of those of its
// sentence-transformers module folders (1_Pooling, 2_Dense, ...: named
// by a number and an underscore), which the model reads too.
func statInto(w io.Writer, path string) error {
	return statDir(w, path, true)
}

func statDir(w io.Writer, path string, modules bool) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		fmt.Fprintf(w, "%s %d %d %s\n", st.Name(), st.Size(), st.ModTime().UnixNano(), fileIdentity(st))
		return nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return err
	}
	for _, e := range entries {
		info, err := e.Info()
		if err == nil && info.IsDir() && modules && moduleFolder(e.Name()) {
			fmt.Fprintf(w, "module %s\n", e.Name())
			if err := statDir(w, filepath.Join(path, e.Name()), false); err != nil {
				return err
			}
			continue
		}
		if err != nil || info.IsDir() {
			continue
		}
		fmt.Fprintf(w, "%s %d %s %s\n", e.Name(), info.Size(), strconv.FormatInt(info.ModTime().UnixNano(), 10), fileIdentity(info))
	}
	return nil
}

// CachedArtifact is one compiled artifact in the compile cache.
type CachedArtifact struct {
	Name     string    `json:"name"`
	Path     string    `json:"path"`
	Size     int64     `json:"size"`
	Modified time.Time `json:"modified"`
}

// CachedArtifacts returns the cache folder and the artifacts in it, the
// newest first (none when the folder does not exist yet).
func CachedArtifacts() (string, []CachedArtifact, error) {
	dir, err := CacheDir()
	if err != nil {
		return "", nil, err
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return dir, nil, nil
	}
	if err != nil {
		return dir, nil, fmt.Errorf("compile cache: %w", err)
	}
	var out []CachedArtifact
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".aot") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, CachedArtifact{Name: e.Name(), Path: filepath.Join(dir, e.Name()), Size: info.Size(), Modified: info.ModTime()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Modified.After(out[j].Modified) })
	return dir, out, nil
}

// lacksMTP reports whether m is a Qwen3.5 artifact whose checkpoint
// declares a multi-token-prediction head that the artifact does not carry
// and whose provenance gives no reason ("mtp").
func lacksMTP(m *plan.Manifest) bool {
	if _, said := m.Provenance["mtp"]; said || m.MTP != nil || m.Architecture != "qwen35" {
		return false // compiled with the head, or without it for a reason
	}
	d, ok := m.HyperParams["deltanet"].(map[string]any)
	if !ok {
		return false
	}
	n, ok := d["mtp_layers"].(float64)
	return ok && n > 0
}

// moduleFolder reports whether name is a sentence-transformers module's
// folder: digits, an underscore, more.
func moduleFolder(name string) bool {
	d, rest, ok := strings.Cut(name, "_")
	if !ok || d == "" || rest == "" {
		return false
	}
	_, err := strconv.Atoi(d)
	return err == nil
}
