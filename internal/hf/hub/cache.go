package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/aotlm/aotlm/internal/userfile"
)

// The cache layout is the one huggingface_hub uses, so that files fetched
// by Python tools are reused here and ours by them:
//
//	<hub>/models--org--name/blobs/<etag>                 file contents, named by git blob sha1 or LFS sha256
//	<hub>/models--org--name/blobs/<etag>.incomplete      a download in progress, resumed with HTTP Range
//	<hub>/models--org--name/snapshots/<commit>/<path>    relative symlink to ../../blobs/<etag>
//	<hub>/models--org--name/refs/<revision>              the commit a branch or tag pointed to
//	<hub>/.locks/models--org--name/<etag>.lock           one writer per blob across processes

// DefaultCacheDir gives the hub cache folder: $HF_HUB_CACHE, else
// $HF_HOME/hub, else ~/.cache/huggingface/hub (what huggingface_hub uses on
// every platform; $XDG_CACHE_HOME replaces ~/.cache when set).
func DefaultCacheDir() (string, error) {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d, nil
	}
	home, err := hfHome()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, "hub"), nil
}

func hfHome() (string, error) {
	if d := os.Getenv("HF_HOME"); d != "" {
		return d, nil
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface"), nil
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("hub cache: no home folder (set HF_HOME): %w", err)
	}
	return filepath.Join(h, ".cache", "huggingface"), nil
}

// repoFolder is the cache folder name of a model repository.
func repoFolder(repo string) string {
	return "models--" + strings.ReplaceAll(repo, "/", "--")
}

// RepoDir is where a model repository lives inside the hub cache.
func RepoDir(cacheDir, repo string) string {
	return filepath.Join(cacheDir, repoFolder(repo))
}

// CachedRepo describes one repository found in the hub cache.
type CachedRepo struct {
	Repo      string            `json:"repo"`      // org/name
	Dir       string            `json:"dir"`       // its folder in the cache
	Size      int64             `json:"size"`      // bytes of its complete blobs
	Snapshots []string          `json:"snapshots"` // commits with a snapshot folder
	Refs      map[string]string `json:"refs"`      // revision -> commit
	Files     []string          `json:"files"`     // file paths of its newest snapshot
}

// List returns the model repositories in the hub cache, sorted by name.
// A missing cache is an empty list.
func List(cacheDir string) ([]CachedRepo, error) {
	entries, err := os.ReadDir(cacheDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("hub cache: %w", err)
	}
	var out []CachedRepo
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, "models--") {
			continue
		}
		repo := strings.Replace(strings.TrimPrefix(name, "models--"), "--", "/", 1)
		c := CachedRepo{Repo: repo, Dir: filepath.Join(cacheDir, name), Refs: map[string]string{}}
		blobs, _ := os.ReadDir(filepath.Join(c.Dir, "blobs"))
		for _, b := range blobs {
			if strings.HasSuffix(b.Name(), ".incomplete") {
				continue
			}
			if info, err := b.Info(); err == nil {
				c.Size += info.Size()
			}
		}
		snaps, _ := os.ReadDir(filepath.Join(c.Dir, "snapshots"))
		var newest string
		var newestTime int64
		for _, s := range snaps {
			c.Snapshots = append(c.Snapshots, s.Name())
			if info, err := s.Info(); err == nil && info.ModTime().UnixNano() >= newestTime {
				newest, newestTime = s.Name(), info.ModTime().UnixNano()
			}
		}
		refsDir := filepath.Join(c.Dir, "refs")
		_ = filepath.WalkDir(refsDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return nil
			}
			b, err := userfile.ReadFile(p, refKind)
			if err == nil {
				rel, _ := filepath.Rel(refsDir, p)
				c.Refs[filepath.ToSlash(rel)] = strings.TrimSpace(string(b))
			}
			return nil
		})
		if commit, ok := c.Refs["main"]; ok {
			newest = commit
		}
		if newest != "" {
			c.Files, _ = snapshotFiles(filepath.Join(c.Dir, "snapshots", newest))
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Repo < out[j].Repo })
	return out, nil
}

// Remove deletes a repository from the hub cache (its blobs, snapshots,
// refs and locks). It reports false when the repository was not cached.
func Remove(cacheDir, repo string) (bool, error) {
	dir := RepoDir(cacheDir, repo)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return false, fmt.Errorf("remove %s: %w", repo, err)
	}
	_ = os.RemoveAll(filepath.Join(cacheDir, ".locks", repoFolder(repo)))
	return true, nil
}

// snapshotFiles lists the file paths (slash-separated, relative) of a
// snapshot folder whose links point at complete blobs.
func snapshotFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if _, err := os.Stat(p); err != nil {
			return nil // a dangling link: its blob was removed
		}
		rel, _ := filepath.Rel(dir, p)
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	sort.Strings(files)
	return files, err
}

// refKind reads a cache's refs/ file: a commit id, refused when it is not
// a regular file (a pipe there would block list and pull).
var refKind = userfile.Config.Named("cache ref").Limit(4 << 10)
