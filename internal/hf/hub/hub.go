// Package hub pulls model repositories from the Hugging Face Hub into the
// Hub's own cache layout (see DefaultCacheDir and the layout notes in
// cache.go), so that downloads are shared with Python tools.
//
// A pull resolves the revision to a commit, lists the repository's files,
// keeps only those a model needs (Select), and downloads them several at a
// time. Each download goes to an .incomplete file that a later pull resumes
// with an HTTP Range request, is verified against the Hub's sha256 (LFS
// files) or git blob id (other files), and only then renamed into place. A
// lock file per blob keeps two processes from writing the same blob.
package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aotlm/aotlm/internal/termsafe"
	"github.com/aotlm/aotlm/internal/userfile"
)

// DefaultEndpoint is the public Hub.
const DefaultEndpoint = "https://huggingface.co"

// Errors a pull can end with; the returned errors wrap them with details.
var (
	ErrNotFound     = errors.New("not found on the Hub")
	ErrUnauthorized = errors.New("not authorized")
	ErrGated        = errors.New("gated repository")
	ErrHashMismatch = errors.New("downloaded file does not match the Hub's hash")
	ErrNotCached    = errors.New("not in the local cache")
	ErrDiskFull     = errors.New("no space left on the device")

	errUnreachable = errors.New("cannot reach the Hub")
)

// Progress hears about downloads. Calls for different files may come from
// different goroutines at once.
type Progress interface {
	// Plan is called once with the files that need downloading and their
	// total size, before any transfer.
	Plan(files []File)
	// Advance reports n more bytes of file on disk (resumed bytes included).
	Advance(file string, n int64)
	// Done reports the end of one file's download.
	Done(file string, err error)
}

// Options configure a Client.
type Options struct {
	Endpoint string       // Hub URL; default $HF_ENDPOINT or DefaultEndpoint
	Token    string       // bearer token for gated and private repositories
	CacheDir string       // hub cache folder; default DefaultCacheDir()
	Offline  bool         // use the cache only, never the network
	HTTP     *http.Client // default: a client without an overall timeout
	Parallel int          // files downloaded at once; default 4
	Progress Progress     // may be nil
	// ReadTimeout fails a request that receives no byte (of its headers
	// or body) for this long; default DefaultReadTimeout, or
	// $HF_HUB_DOWNLOAD_TIMEOUT seconds.
	ReadTimeout time.Duration
	// create opens the .incomplete file of a download; tests replace it to
	// simulate a full disk.
	create func(name string) (blobFile, error)
}

// FromEnv fills the options from the environment as huggingface_hub does:
// HF_ENDPOINT, HF_TOKEN (else the token file $HF_TOKEN_PATH, default
// $HF_HOME/token, that `huggingface-cli login` writes), HF_HUB_CACHE / HF_HOME and
// HF_HUB_OFFLINE=1.
func FromEnv() (Options, error) {
	o := Options{Endpoint: os.Getenv("HF_ENDPOINT"), Token: os.Getenv("HF_TOKEN")}
	if o.Token == "" {
		path := os.Getenv("HF_TOKEN_PATH")
		if home, err := hfHome(); err == nil && path == "" {
			path = filepath.Join(home, "token")
		}
		if b, err := userfile.ReadFile(path, userfile.Config.Named("token file").Limit(64<<10)); err == nil && path != "" {
			o.Token = strings.TrimSpace(string(b))
		}
	}
	if v := os.Getenv("HF_HUB_DOWNLOAD_TIMEOUT"); v != "" {
		s, err := strconv.ParseFloat(v, 64)
		if err != nil || !(s > 0) || s > 1e6 {
			return o, fmt.Errorf("HF_HUB_DOWNLOAD_TIMEOUT=%q: want a positive number of seconds", v)
		}
		o.ReadTimeout = time.Duration(s * float64(time.Second))
	}
	switch strings.ToLower(os.Getenv("HF_HUB_OFFLINE")) {
	case "1", "true", "yes", "on":
		o.Offline = true
	}
	d, err := DefaultCacheDir()
	if err != nil {
		return o, err
	}
	o.CacheDir = d
	return o, nil
}

// Client pulls repositories from one Hub into one cache.
type Client struct {
	opts Options
	http *http.Client
}

// New makes a client; empty options take their defaults.
func New(opts Options) (*Client, error) {
	if opts.Endpoint == "" {
		opts.Endpoint = os.Getenv("HF_ENDPOINT")
	}
	if opts.Endpoint == "" {
		opts.Endpoint = DefaultEndpoint
	}
	opts.Endpoint = strings.TrimRight(opts.Endpoint, "/")
	if opts.CacheDir == "" {
		d, err := DefaultCacheDir()
		if err != nil {
			return nil, err
		}
		opts.CacheDir = d
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = DefaultReadTimeout
	}
	if opts.create == nil {
		opts.create = openIncomplete
	}
	hc := opts.HTTP
	if hc == nil {
		hc = &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   30 * time.Second,
			ResponseHeaderTimeout: 60 * time.Second,
			MaxIdleConnsPerHost:   8,
		}}
	}
	c := &Client{opts: opts}
	own := *hc
	own.CheckRedirect = c.redirectPolicy(nil)
	c.http = &own
	return c, nil
}

// CacheDir is the hub cache folder the client writes to.
func (c *Client) CacheDir() string { return c.opts.CacheDir }

// File is one file of a repository at a commit.
type File struct {
	Path string // slash-separated path in the repository
	Size int64
	// ETag names the blob: the LFS sha256 for LFS files, else the git blob
	// sha1. It is what the Hub's resolve endpoint answers as (X-Linked-)ETag.
	ETag string
	LFS  bool
}

// Result is a pulled repository.
type Result struct {
	Repo    string   `json:"repo"`
	Commit  string   `json:"commit"`
	Dir     string   `json:"dir"`           // the snapshot folder
	Model   string   `json:"model"`         // what to open: the GGUF file of a GGUF pick, else Dir
	Files   []string `json:"files"`         // the pulled files, relative to Dir
	Fetched int64    `json:"fetched_bytes"` // bytes transferred over the network by this pull
	Cached  bool     `json:"cached"`        // answered from the cache without asking the Hub
}

// revisionInfo is the part of /api/models/{repo}/revision/{rev} used here.
type revisionInfo struct {
	SHA   string `json:"sha"`
	Gated any    `json:"gated"`
}

// treeEntry is one entry of /api/models/{repo}/tree/{rev}?recursive=true.
type treeEntry struct {
	Type string `json:"type"`
	Path string `json:"path"`
	OID  string `json:"oid"`
	Size int64  `json:"size"`
	LFS  *struct {
		OID  string `json:"oid"`
		Size int64  `json:"size"`
	} `json:"lfs"`
}

// Pull makes the files of ref that a model needs present in the cache and
// returns the snapshot. Files already in the cache are not fetched again.
// When the Hub cannot be reached (or Offline is set) a complete cached
// snapshot of the revision is used instead.
func (c *Client) Pull(ctx context.Context, ref Ref) (*Result, error) {
	if c.opts.Offline {
		res, err := c.fromCache(ref)
		if err != nil {
			return nil, fmt.Errorf("%s (offline mode, HF_HUB_OFFLINE=1): %w", ref, err)
		}
		return res, nil
	}
	commit, err := c.resolveCommit(ctx, ref)
	if err != nil {
		if errors.Is(err, errUnreachable) && ctx.Err() == nil {
			if res, cerr := c.fromCache(ref); cerr == nil {
				return res, nil
			}
		}
		return nil, err
	}
	entries, err := c.listTree(ctx, ref.Repo, commit)
	if err != nil {
		return nil, err
	}
	var files []File
	for _, e := range entries {
		if e.Type != "file" {
			continue
		}
		f := File{Path: e.Path, Size: e.Size, ETag: e.OID}
		if e.LFS != nil {
			f.ETag, f.Size, f.LFS = e.LFS.OID, e.LFS.Size, true
		}
		files = append(files, f)
	}
	pick, model, err := Select(files, ref.Quant)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	repoDir := RepoDir(c.opts.CacheDir, ref.Repo)
	snap := filepath.Join(repoDir, "snapshots", commit)
	res := &Result{Repo: ref.Repo, Commit: commit, Dir: snap, Model: snap}
	if model != "" {
		res.Model = filepath.Join(snap, filepath.FromSlash(model))
	}
	var need []File
	for _, f := range pick {
		res.Files = append(res.Files, f.Path)
		if !c.blobComplete(repoDir, f) {
			need = append(need, f)
		}
	}
	if c.opts.Progress != nil {
		c.opts.Progress.Plan(need)
	}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		work     = make(chan File)
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for w := 0; w < min(c.opts.Parallel, max(len(need), 1)); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range work {
				n, err := c.fetchBlob(ctx, ref.Repo, commit, repoDir, f)
				if c.opts.Progress != nil {
					c.opts.Progress.Done(f.Path, err)
				}
				mu.Lock()
				res.Fetched += n
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				mu.Unlock()
			}
		}()
	}
	for _, f := range need {
		if ctx.Err() != nil {
			break
		}
		work <- f
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	for _, f := range pick {
		if err := linkSnapshot(repoDir, commit, f); err != nil {
			return nil, err
		}
	}
	if rev := ref.revision(); rev != commit {
		if err := writeRef(repoDir, rev, commit); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// fromCache answers a pull from a cached snapshot: the revision's commit
// from refs/ (or the commit itself), and the files Select would pick among
// those present.
func (c *Client) fromCache(ref Ref) (*Result, error) {
	repoDir := RepoDir(c.opts.CacheDir, ref.Repo)
	rev := ref.revision()
	commit := rev
	if !isCommit(rev) {
		b, err := userfile.ReadFile(filepath.Join(repoDir, "refs", filepath.FromSlash(rev)), refKind)
		if err != nil {
			return nil, fmt.Errorf("revision %q of %s: %w", rev, ref.Repo, ErrNotCached)
		}
		commit = strings.TrimSpace(string(b))
	}
	snap := filepath.Join(repoDir, "snapshots", commit)
	names, err := snapshotFiles(snap)
	if err != nil || len(names) == 0 {
		return nil, fmt.Errorf("snapshot %s of %s: %w", commit, ref.Repo, ErrNotCached)
	}
	files := make([]File, len(names))
	for i, n := range names {
		files[i] = File{Path: n}
		if st, err := os.Stat(filepath.Join(snap, filepath.FromSlash(n))); err == nil {
			files[i].Size = st.Size()
		}
	}
	pick, model, err := Select(files, ref.Quant)
	if err != nil {
		return nil, fmt.Errorf("cached snapshot %s of %s: %w", commit, ref.Repo, err)
	}
	res := &Result{Repo: ref.Repo, Commit: commit, Dir: snap, Model: snap, Cached: true}
	if model != "" {
		res.Model = filepath.Join(snap, filepath.FromSlash(model))
	}
	for _, f := range pick {
		res.Files = append(res.Files, f.Path)
	}
	return res, nil
}

// resolveCommit asks the Hub which commit ref's revision points to.
func (c *Client) resolveCommit(ctx context.Context, ref Ref) (string, error) {
	u := c.opts.Endpoint + "/api/models/" + ref.Repo + "/revision/" + url.PathEscape(ref.revision())
	var info revisionInfo
	if _, err := c.getJSON(ctx, u, ref.Repo, &info); err != nil {
		return "", err
	}
	if !isCommit(info.SHA) {
		return "", fmt.Errorf("%s: the Hub answered no commit for revision %q", ref.Repo, ref.revision())
	}
	return info.SHA, nil
}

// listTree lists every file of the repository at commit, following the
// tree API's Link: <...>; rel="next" pagination.
func (c *Client) listTree(ctx context.Context, repo, commit string) ([]treeEntry, error) {
	u := c.opts.Endpoint + "/api/models/" + repo + "/tree/" + commit + "?recursive=true"
	var all []treeEntry
	seen := map[string]bool{}
	for page := 0; u != ""; page++ {
		if seen[u] {
			return nil, fmt.Errorf("%s: the Hub's file list loops: page %d links back to %s", repo, page, termsafe.String(u))
		}
		if page >= maxTreePages {
			return nil, fmt.Errorf("%s: the Hub's file list has more than %d pages", repo, maxTreePages)
		}
		seen[u] = true
		var entries []treeEntry
		h, err := c.getJSON(ctx, u, repo, &entries)
		if err != nil {
			return nil, err
		}
		all = append(all, entries...)
		next := nextLink(h.Get("Link"), u)
		if next == "" {
			break
		}
		if len(entries) == 0 {
			return nil, fmt.Errorf("%s: the Hub's file list has an empty page %d that links to another", repo, page)
		}
		if nu, err := url.Parse(next); err != nil || !c.sameOrigin(nu) {
			return nil, fmt.Errorf("%s: the Hub's file list links its next page to another host (%s): refused", repo, termsafe.String(next))
		}
		u = next
	}
	return all, nil
}

// maxTreePages bounds the pages of a repository's file list (of 1000
// files each on the Hub).
const maxTreePages = 1000

// nextLink reads the rel="next" URL of a Link header, resolved against base.
func nextLink(link, base string) string {
	for _, part := range strings.Split(link, ",") {
		target, params, ok := strings.Cut(part, ";")
		if !ok || !strings.Contains(params, `rel="next"`) {
			continue
		}
		target = strings.Trim(strings.TrimSpace(target), "<>")
		b, err1 := url.Parse(base)
		t, err2 := url.Parse(target)
		if err1 != nil || err2 != nil {
			return ""
		}
		return b.ResolveReference(t).String()
	}
	return ""
}

func (c *Client) newRequest(ctx context.Context, u string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if c.opts.Token != "" && c.sameOrigin(req.URL) {
		req.Header.Set("Authorization", "Bearer "+c.opts.Token)
	}
	req.Header.Set("User-Agent", "aotlm")
	return req, nil
}

func (c *Client) getJSON(ctx context.Context, u, repo string, v any) (http.Header, error) {
	ctx, g, release := guard(ctx, c.opts.ReadTimeout)
	defer release()
	req, err := c.newRequest(ctx, u)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", repo, errUnreachable, g.err(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, c.statusError(resp, repo, "")
	}
	if err := json.NewDecoder(io.LimitReader(g.body(resp.Body), 256<<20)).Decode(v); err != nil {
		return nil, fmt.Errorf("%s: reading the Hub's answer from %s: %w", repo, termsafe.String(u), err)
	}
	return resp.Header, nil
}

// statusError turns a Hub error answer into an error that says what to do.
// The Hub names the cause in X-Error-Code (GatedRepo, RepoNotFound,
// RevisionNotFound, EntryNotFound) and explains it in X-Error-Message.
func (c *Client) statusError(resp *http.Response, repo, file string) error {
	code := resp.Header.Get("X-Error-Code")
	msg := termsafe.String(resp.Header.Get("X-Error-Message"))
	what := repo
	if file != "" {
		what = repo + "/" + file
	}
	detail := ""
	if msg != "" {
		detail = " (" + msg + ")"
	}
	page := "https://huggingface.co/" + repo
	if c.opts.Endpoint != DefaultEndpoint {
		page = c.opts.Endpoint + "/" + repo
	}
	switch {
	case code == "GatedRepo" || (resp.StatusCode == http.StatusForbidden && strings.Contains(strings.ToLower(msg), "gated")):
		if c.opts.Token == "" {
			return fmt.Errorf("%s: %w: accept its license at %s, then set HF_TOKEN to an access token of that account%s", what, ErrGated, page, detail)
		}
		return fmt.Errorf("%s: %w: the token's account has not been granted access; accept the license at %s%s", what, ErrGated, page, detail)
	case resp.StatusCode == http.StatusUnauthorized:
		if c.opts.Token == "" {
			return fmt.Errorf("%s: %w: the repository does not exist or is private; for a private one set HF_TOKEN%s", what, ErrUnauthorized, detail)
		}
		return fmt.Errorf("%s: %w: the Hub refused the token (HF_TOKEN); check that it is valid%s", what, ErrUnauthorized, detail)
	case resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%s: %w: access denied for this token%s", what, ErrUnauthorized, detail)
	case resp.StatusCode == http.StatusNotFound:
		switch code {
		case "RevisionNotFound":
			return fmt.Errorf("%s: revision %w%s", what, ErrNotFound, detail)
		case "EntryNotFound":
			return fmt.Errorf("%s: file %w%s", what, ErrNotFound, detail)
		}
		return fmt.Errorf("%s: %w%s", what, ErrNotFound, detail)
	}
	return fmt.Errorf("%s: the Hub answered %s%s", what, termsafe.String(resp.Status), detail)
}

// resolveURL is where a file of a commit is downloaded from.
func (c *Client) resolveURL(repo, commit, file string) string {
	parts := strings.Split(file, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return c.opts.Endpoint + "/" + repo + "/resolve/" + commit + "/" + path.Join(parts...)
}
