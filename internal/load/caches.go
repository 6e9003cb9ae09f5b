package load

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/dustin/go-humanize"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/hf/hub"
	"github.com/aotlm/aotlm/internal/output"
	"github.com/aotlm/aotlm/internal/termsafe"
)

// Caches are the Hugging Face cache, where pulls go, and the compile
// cache with its artifacts.
type Caches struct {
	// the JSON object of `aotlm list --json`, its keys in sorted order
	Artifacts   []compile.CachedArtifact `json:"artifacts"`
	ArtifactDir string                   `json:"compile_cache"`
	HubDir      string                   `json:"hub_cache"`
	Models      []hub.CachedRepo         `json:"models"`
	// Stale are the temporary files and folders in the compile cache
	// that writers which are gone left; the next write of the same
	// artifact removes them.
	Stale []output.StaleTemp `json:"stale_temps"`
}

// ListCaches lists the models of the Hugging Face cache and the
// artifacts of the compile cache.
func ListCaches() (*Caches, error) {
	c, err := hubCache()
	if err != nil {
		return nil, err
	}
	if c.Models, err = hub.List(c.HubDir); err != nil {
		return nil, err
	}
	if c.ArtifactDir, c.Artifacts, err = compile.CachedArtifacts(); err != nil {
		return nil, err
	}
	if c.Stale, err = output.Stale(c.ArtifactDir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("compile cache: %w", err)
	}
	if c.Stale == nil {
		c.Stale = []output.StaleTemp{}
	}
	return c, nil
}

// OpenCaches finds both caches and lists the compiled artifacts (not the
// models), for Remove.
func OpenCaches() (*Caches, error) {
	c, err := hubCache()
	if err != nil {
		return nil, err
	}
	if c.ArtifactDir, c.Artifacts, err = compile.CachedArtifacts(); err != nil {
		return nil, err
	}
	return c, nil
}

func hubCache() (*Caches, error) {
	dir, err := hub.DefaultCacheDir()
	if err != nil {
		return nil, err
	}
	return &Caches{HubDir: dir}, nil
}

// NotCachedError is Remove's error for a name that is in neither cache.
type NotCachedError struct {
	Name string
	// Repo is the Hub repository Name names ("" when it names none),
	// which the Hub cache HubDir does not hold.
	Repo, HubDir string
}

func (e *NotCachedError) Error() string {
	if e.Repo == "" {
		return fmt.Sprintf("%q is neither a cached model nor an artifact", e.Name)
	}
	return fmt.Sprintf("%s is not in the cache %s", e.Repo, e.HubDir)
}

// RemoveArtifacts removes every compiled artifact, telling removed of
// each (its name and bytes) as it goes.
func (c *Caches) RemoveArtifacts(removed func(name string, size int64)) error {
	for _, a := range c.Artifacts {
		if err := removeArtifact(a, removed); err != nil {
			return err
		}
	}
	return nil
}

// Remove removes what name names: the compile cache's artifact of that
// name (NAME or NAME.aot), else the Hub cache's repository (every
// revision); removed is told of each removal. A name in neither cache is
// a *NotCachedError.
func (c *Caches) Remove(name string, removed func(name string, size int64)) error {
	found := false
	for _, a := range c.Artifacts {
		if name == a.Name || name+".aot" == a.Name {
			found = true
			if err := removeArtifact(a, removed); err != nil {
				return err
			}
		}
	}
	if found {
		return nil
	}
	ref, err := hub.ParseRef(name)
	if err != nil {
		return &NotCachedError{Name: name}
	}
	repos, _ := hub.List(c.HubDir)
	var size int64
	for _, r := range repos {
		if r.Repo == ref.Repo {
			size = r.Size
		}
	}
	ok, err := hub.Remove(c.HubDir, ref.Repo)
	if err != nil {
		return err
	}
	if !ok {
		return &NotCachedError{Name: name, Repo: ref.Repo, HubDir: c.HubDir}
	}
	removed(termsafe.String(ref.Repo), size)
	return nil
}

func removeArtifact(a compile.CachedArtifact, removed func(string, int64)) error {
	if err := os.Remove(a.Path); err != nil {
		return err
	}
	removed(termsafe.String(a.Name), a.Size)
	return nil
}

// Write prints the caches as two tables: the models (size, revision,
// weight files) and the artifacts (size, when compiled).
func (c *Caches) Write(out io.Writer) error {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "MODEL\tSIZE\tREVISION\tFILES\n")
	for _, r := range c.Models {
		rev := ""
		if commit, ok := r.Refs["main"]; ok {
			rev = "main " + shortCommit(commit)
		} else if len(r.Snapshots) > 0 {
			rev = shortCommit(r.Snapshots[0])
		}
		// names read from the cache's folders, which a server chose
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", termsafe.String(r.Repo), humanize.IBytes(uint64(r.Size)), termsafe.String(rev),
			termsafe.String(summarizeFiles(r.Files)))
	}
	if len(c.Models) == 0 {
		fmt.Fprintf(w, "(none)\n")
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out)
	w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "ARTIFACT\tSIZE\tCOMPILED\n")
	for _, a := range c.Artifacts {
		fmt.Fprintf(w, "%s\t%s\t%s\n", termsafe.String(a.Name), humanize.IBytes(uint64(a.Size)), a.Modified.Format("2006-01-02 15:04"))
	}
	if len(c.Artifacts) == 0 {
		fmt.Fprintf(w, "(none)\n")
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if len(c.Stale) > 0 {
		var size int64
		for _, s := range c.Stale {
			size += s.Size
		}
		_, err := fmt.Fprintf(out, "\n%d stale temporary files (%s) left by interrupted compiles; the next compile of the same model removes them\n",
			len(c.Stale), humanize.IBytes(uint64(size)))
		return err
	}
	return nil
}

// shortCommit is a commit's first 12 hex digits.
func shortCommit(commit string) string { return commit[:min(len(commit), 12)] }

// summarizeFiles names the weight files of a snapshot (GGUF or
// safetensors) and counts the rest.
func summarizeFiles(files []string) string {
	var weights []string
	for _, f := range files {
		if strings.HasSuffix(f, ".gguf") || strings.HasSuffix(f, ".safetensors") || strings.HasSuffix(f, ".bin") {
			weights = append(weights, f)
		}
	}
	s := strings.Join(weights, ", ")
	if len(weights) > 2 {
		s = fmt.Sprintf("%s … (%d weight files)", weights[0], len(weights))
	}
	if rest := len(files) - len(weights); rest > 0 {
		s += fmt.Sprintf(" +%d", rest)
	}
	return s
}
