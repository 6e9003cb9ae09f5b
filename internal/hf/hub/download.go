package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/aotlm/aotlm/internal/termsafe"
	"github.com/aotlm/aotlm/internal/userfile"
)

// blobFile is an open .incomplete file.
type blobFile interface {
	io.ReadWriteSeeker
	Truncate(size int64) error
	Sync() error
	Close() error
}

func openIncomplete(name string) (blobFile, error) {
	return os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
}

func blobPath(repoDir, etag string) string { return filepath.Join(repoDir, "blobs", etag) }

// blobComplete reports whether f's blob is on disk with its full size and
// its snapshot link in place is not needed to know that.
func (c *Client) blobComplete(repoDir string, f File) bool {
	st, err := os.Stat(blobPath(repoDir, f.ETag))
	return err == nil && st.Mode().IsRegular() && st.Size() == f.Size
}

// fetchBlob downloads one file's blob unless another process has, holding
// the blob's lock meanwhile. It returns the bytes transferred.
func (c *Client) fetchBlob(ctx context.Context, repo, commit, repoDir string, f File) (int64, error) {
	if !validETag(f.ETag) {
		return 0, fmt.Errorf("%s/%s: the Hub listed an invalid blob id %q", repo, f.Path, f.ETag)
	}
	if err := os.MkdirAll(filepath.Join(repoDir, "blobs"), 0o755); err != nil {
		return 0, fmt.Errorf("hub cache: %w", err)
	}
	lockDir := filepath.Join(c.opts.CacheDir, ".locks", repoFolder(repo))
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return 0, fmt.Errorf("hub cache: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(lockDir, f.ETag+".lock"))
	if err != nil {
		return 0, fmt.Errorf("%s/%s: lock: %w", repo, f.Path, err)
	}
	defer unlock()
	if c.blobComplete(repoDir, f) { // another process finished it while we waited
		if c.opts.Progress != nil {
			c.opts.Progress.Advance(f.Path, f.Size)
		}
		return 0, nil
	}
	var total int64
	for attempt := 0; ; attempt++ {
		n, err := c.download(ctx, repo, commit, repoDir, f)
		total += n
		if errors.Is(err, ErrHashMismatch) && attempt == 0 {
			if c.opts.Progress != nil {
				c.opts.Progress.Advance(f.Path, -f.Size)
			}
			continue // the bad file was deleted: fetch it once more from the start
		}
		return total, err
	}
}

// download fetches f into blobs/<etag>.incomplete, resuming what is there,
// verifies it and renames it to blobs/<etag>. A hash mismatch deletes the
// .incomplete file; other failures keep it for the next pull to resume.
func (c *Client) download(ctx context.Context, repo, commit, repoDir string, f File) (fetched int64, err error) {
	final := blobPath(repoDir, f.ETag)
	inc := final + ".incomplete"
	what := repo + "/" + f.Path
	out, err := c.opts.create(inc)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, diskError(err))
	}
	closed := false
	defer func() {
		if !closed {
			out.Close()
		}
	}()
	have, err := out.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	if have > f.Size {
		if err := out.Truncate(0); err != nil {
			return 0, fmt.Errorf("%s: %w", what, err)
		}
		have = 0
	}
	h := newHasher(f)
	if have > 0 { // the hash covers the resumed prefix too
		if _, err := out.Seek(0, io.SeekStart); err != nil {
			return 0, fmt.Errorf("%s: %w", what, err)
		}
		if _, err := io.CopyN(h, out, have); err != nil {
			return 0, fmt.Errorf("%s: reading the partial download: %w", what, err)
		}
	}
	if c.opts.Progress != nil && have > 0 {
		c.opts.Progress.Advance(f.Path, have)
	}
	if have < f.Size {
		n, err := c.transfer(ctx, repo, commit, f, out, h, &have)
		fetched = n
		if err != nil {
			return fetched, err
		}
	}
	if have != f.Size {
		return fetched, fmt.Errorf("%s: got %d bytes, the Hub lists %d", what, have, f.Size)
	}
	if got := h.sum(); got != f.ETag {
		out.Close()
		closed = true
		os.Remove(inc)
		kind := "git blob id"
		if f.LFS {
			kind = "sha256"
		}
		return fetched, fmt.Errorf("%s: %w: %s %s, expected %s; the file was deleted", what, ErrHashMismatch, kind, got, f.ETag)
	}
	if err := out.Sync(); err != nil {
		return fetched, fmt.Errorf("%s: %w", what, diskError(err))
	}
	closed = true
	if err := out.Close(); err != nil {
		return fetched, fmt.Errorf("%s: %w", what, diskError(err))
	}
	if err := os.Rename(inc, final); err != nil {
		return fetched, fmt.Errorf("%s: %w", what, err)
	}
	return fetched, nil
}

// transfer GETs the file from *have on and appends it to out.
func (c *Client) transfer(ctx context.Context, repo, commit string, f File, out blobFile, h *hasher, have *int64) (int64, error) {
	what := repo + "/" + termsafe.String(f.Path)
	ctx, g, release := guard(ctx, c.opts.ReadTimeout)
	defer release()
	req, err := c.newRequest(ctx, c.resolveURL(repo, commit, f.Path))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept-Encoding", "identity")
	if *have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", *have))
	}
	// The resolve endpoint answers small files itself and redirects LFS
	// files to a file host; its own headers name the blob and commit.
	var first *http.Response
	hc := *c.http
	hc.CheckRedirect = c.redirectPolicy(func(r *http.Request) {
		if first == nil {
			first = r.Response
		}
	})
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w: %w", what, errUnreachable, g.err(err))
	}
	defer resp.Body.Close()
	if first == nil {
		first = resp
	}
	if first.StatusCode >= 400 || (resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent) {
		if resp.StatusCode == http.StatusRequestedRangeNotSatisfiable {
			// the partial file is longer than what the server has: restart
			*have = 0
			h.reset()
			if err := out.Truncate(0); err != nil {
				return 0, err
			}
			return 0, fmt.Errorf("%s: the server refused to resume (416); the partial file was reset, pull again", what)
		}
		return 0, c.statusError(first, repo, f.Path)
	}
	if got := normalizeETag(first.Header.Get("X-Linked-Etag")); got != "" && got != f.ETag {
		return 0, fmt.Errorf("%s: the Hub serves blob %s, its file list says %s", what, got, f.ETag)
	} else if got == "" {
		if e := normalizeETag(first.Header.Get("ETag")); e != "" && validETag(e) && e != f.ETag {
			return 0, fmt.Errorf("%s: the Hub serves blob %s, its file list says %s", what, e, f.ETag)
		}
	}
	if ls := first.Header.Get("X-Linked-Size"); ls != "" && ls != strconv.FormatInt(f.Size, 10) {
		return 0, fmt.Errorf("%s: the Hub serves %s bytes, its file list says %d", what, ls, f.Size)
	}
	if rc := first.Header.Get("X-Repo-Commit"); rc != "" && rc != commit {
		return 0, fmt.Errorf("%s: the Hub serves commit %s, asked for %s", what, rc, commit)
	}
	switch resp.StatusCode {
	case http.StatusPartialContent:
		start, ok := contentRangeStart(resp.Header.Get("Content-Range"))
		if !ok || start != *have {
			return 0, fmt.Errorf("%s: the server resumed at %q, asked for byte %d", what, resp.Header.Get("Content-Range"), *have)
		}
	case http.StatusOK:
		if *have > 0 { // the server ignored Range: start over
			if c.opts.Progress != nil {
				c.opts.Progress.Advance(f.Path, -*have)
			}
			if err := out.Truncate(0); err != nil {
				return 0, fmt.Errorf("%s: %w", what, err)
			}
			*have = 0
			h.reset()
		}
	}
	if _, err := out.Seek(*have, io.SeekStart); err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	var fetched int64
	buf := make([]byte, 256<<10)
	limit := f.Size - *have
	body := io.LimitReader(g.body(resp.Body), limit+1)
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if fetched+int64(n) > limit {
				return fetched, fmt.Errorf("%s: the server sent more than the %d bytes the Hub lists", what, f.Size)
			}
			if _, werr := out.Write(buf[:n]); werr != nil {
				return fetched, fmt.Errorf("%s: writing %s: %w", what, filepath.Base(f.Path), diskError(werr))
			}
			h.Write(buf[:n])
			fetched += int64(n)
			*have += int64(n)
			if c.opts.Progress != nil {
				c.opts.Progress.Advance(f.Path, int64(n))
			}
		}
		if rerr == io.EOF {
			return fetched, nil
		}
		if rerr != nil {
			return fetched, fmt.Errorf("%s: download cut after %d of %d bytes (pull again to resume): %w", what, *have, f.Size, rerr)
		}
	}
}

// diskError names a full disk plainly.
func diskError(err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("%w (the partial download is kept as .incomplete and resumes on the next pull): %w", ErrDiskFull, err)
	}
	return err
}

func contentRangeStart(v string) (int64, bool) {
	v, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return 0, false
	}
	s, _, ok := strings.Cut(v, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// normalizeETag strips the weak prefix and quotes of an ETag header.
func normalizeETag(e string) string {
	return strings.Trim(strings.TrimPrefix(strings.TrimSpace(e), "W/"), `"`)
}

// validETag accepts the two blob ids the Hub uses: 40 (git sha1) or 64
// (sha256) lowercase hex digits. It also keeps blob names path-safe.
func validETag(e string) bool {
	if len(e) != 40 && len(e) != 64 {
		return false
	}
	for _, r := range e {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// hasher computes a file's blob id: sha256 of the contents for LFS files,
// git's sha1 of "blob <size>\x00" + contents for the others.
type hasher struct {
	f File
	hash.Hash
}

func newHasher(f File) *hasher {
	h := &hasher{f: f}
	h.reset()
	return h
}

func (h *hasher) reset() {
	if h.f.LFS || len(h.f.ETag) == 64 {
		h.Hash = sha256.New()
		return
	}
	h.Hash = sha1.New()
	fmt.Fprintf(h.Hash, "blob %d\x00", h.f.Size)
}

func (h *hasher) sum() string { return hex.EncodeToString(h.Sum(nil)) }

// GitBlobID is the id git gives a file with these contents.
func GitBlobID(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// linkSnapshot points snapshots/<commit>/<path> at the blob with a relative
// symlink, replacing any older link atomically.
func linkSnapshot(repoDir, commit string, f File) error {
	link := filepath.Join(repoDir, "snapshots", commit, filepath.FromSlash(f.Path))
	if !strings.HasPrefix(link, filepath.Join(repoDir, "snapshots", commit)+string(filepath.Separator)) {
		return fmt.Errorf("file path %q leaves the snapshot folder", f.Path)
	}
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	target, err := filepath.Rel(filepath.Dir(link), blobPath(repoDir, f.ETag))
	if err != nil {
		return err
	}
	if cur, err := os.Readlink(link); err == nil && cur == target {
		return nil
	}
	tmp := fmt.Sprintf("%s.%d.tmp", link, os.Getpid())
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	if err := os.Rename(tmp, link); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("hub cache: %w", err)
	}
	return nil
}

// writeRef records which commit a revision pointed to.
func writeRef(repoDir, rev, commit string) error {
	p := filepath.Join(repoDir, "refs", filepath.FromSlash(rev))
	if b, err := userfile.ReadFile(p, refKind); err == nil && strings.TrimSpace(string(b)) == commit {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".ref-*")
	if err != nil {
		return fmt.Errorf("hub cache: %w", err)
	}
	_, err = tmp.WriteString(commit)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("hub cache: %w", err)
	}
	return nil
}
