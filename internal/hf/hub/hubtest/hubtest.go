// Package hubtest is a fake Hugging Face Hub for tests. It answers the
// calls that a pull makes the way huggingface.co does:
//
//   - GET /api/models/{org}/{name}/revision/{rev}: JSON with "id", "sha"
//     (the commit), "siblings" [{"rfilename"}], "gated" and "private". An
//     unknown repository is 401 with X-Error-Code: RepoNotFound without a
//     token (the Hub does not reveal whether a private repository exists)
//     and 404 with one; an unknown revision is 404 RevisionNotFound.
//   - GET /api/models/{org}/{name}/tree/{rev}?recursive=true: a JSON array
//     of {"type": "file", "oid" (git blob sha1), "size", "path", "lfs":
//     {"oid" (sha256), "size", "pointerSize"}} ("lfs" only for LFS files),
//     paginated with a Link: <...>; rel="next" header.
//   - GET or HEAD /{org}/{name}/resolve/{rev}/{path}: always X-Repo-Commit.
//     A regular file is answered directly with ETag: "<git blob sha1>" and
//     honors Range (206 + Content-Range, 416 past the end). An LFS file
//     answers 302 to a separate file host (the CDN) with X-Linked-Etag:
//     "<sha256>", X-Linked-Size, and an ETag of its own. A gated repository
//     answers 401 X-Error-Code: GatedRepo without a token and 403 GatedRepo
//     with a token that was not granted access; an unknown file is 404
//     EntryNotFound.
//   - the file host serves blobs by sha256 with Range support.
//
// Faults for tests: CutNext ends the next transfer of a file after some
// bytes (the connection is dropped), StallNext stops sending the next
// transfer of a file (or the next file list page) after some bytes while
// keeping the connection open, CorruptNext flips a byte in the next
// transfers, NextLink rewrites the file list's pagination links, and
// Served/Requests/Tokens count what was sent and received.
package hubtest

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is the fake Hub (Hub) and its file host (CDN).
type Server struct {
	Hub, CDN *httptest.Server
	// PageSize is the number of tree entries per page (default 1000).
	PageSize int
	// Delay slows every body write (of up to 32 KiB) down, so that
	// concurrent pulls overlap.
	Delay time.Duration
	// NextLink, when set, replaces the rel="next" target of each file
	// list page (next, "" on the last page) with what it returns ("": no
	// link); self is the page's own URL.
	NextLink func(self, next string) string

	done     chan struct{} // closed by Close: stalled answers end
	mu       sync.Mutex
	repos    map[string]*Repo
	blobs    map[string][]byte // sha256 -> contents, for the file host
	cut      map[string]int64  // file path -> bytes before the next cut
	corrupt  map[string]int    // file path -> transfers left to corrupt
	served   map[string]int64  // file path -> body bytes sent
	requests map[string]int    // file path -> transfers started
	stall    map[string]int64  // file path ("" the file list) -> bytes before the next stall
	tokens   map[string]int    // "hub" or "cdn" -> requests that carried a token
}

// Repo is one model repository with a single commit on "main".
type Repo struct {
	Name   string
	Commit string
	Files  map[string][]byte
	// Gated repositories serve files only to tokens in Granted.
	Gated   bool
	Granted map[string]bool
}

// New starts a fake Hub; Close stops it.
func New() *Server {
	s := &Server{PageSize: 1000, repos: map[string]*Repo{}, blobs: map[string][]byte{},
		cut: map[string]int64{}, corrupt: map[string]int{}, served: map[string]int64{}, requests: map[string]int{},
		stall: map[string]int64{}, tokens: map[string]int{}, done: make(chan struct{})}
	s.CDN = httptest.NewServer(http.HandlerFunc(s.serveCDN))
	s.Hub = httptest.NewServer(http.HandlerFunc(s.serveHub))
	return s
}

// URL is the Hub endpoint (what HF_ENDPOINT would be set to).
func (s *Server) URL() string { return s.Hub.URL }

// Close stops both servers.
func (s *Server) Close() {
	close(s.done)
	s.Hub.Close()
	s.CDN.Close()
}

// IsLFS tells which files the fake stores in LFS: weights, as on the Hub.
func IsLFS(path string) bool {
	for _, ext := range []string{".safetensors", ".gguf", ".bin", ".pt", ".model"} {
		if strings.HasSuffix(path, ext) {
			return true
		}
	}
	return false
}

// AddRepo publishes files as repository name at a commit derived from them.
func (s *Server) AddRepo(name string, files map[string][]byte) *Repo {
	h := sha1.New()
	paths := sortedKeys(files)
	for _, p := range paths {
		fmt.Fprintf(h, "%s %s\n", p, GitBlobID(files[p]))
	}
	r := &Repo{Name: name, Commit: hex.EncodeToString(h.Sum(nil)), Files: files, Granted: map[string]bool{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[name] = r
	for _, p := range paths {
		if IsLFS(p) {
			s.blobs[SHA256(files[p])] = files[p]
		}
	}
	return r
}

// CutNext makes the next transfer of path stop after n body bytes.
func (s *Server) CutNext(path string, n int64) {
	s.mu.Lock()
	s.cut[path] = n
	s.mu.Unlock()
}

// StallNext makes the next transfer of path (or, for path "", the next
// file list page) send n body bytes and then nothing, the connection kept
// open until the client gives up.
func (s *Server) StallNext(path string, n int64) {
	s.mu.Lock()
	s.stall[path] = n
	s.mu.Unlock()
}

// Tokens is the number of requests that carried an Authorization header,
// to the Hub (host "hub") or to the file host ("cdn").
func (s *Server) Tokens(host string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens[host]
}

// countToken counts r's token for host.
func (s *Server) countToken(host string, r *http.Request) {
	if r.Header.Get("Authorization") != "" {
		s.mu.Lock()
		s.tokens[host]++
		s.mu.Unlock()
	}
}

// CorruptNext flips one byte in the middle of the next times transfers of path.
func (s *Server) CorruptNext(path string, times int) {
	s.mu.Lock()
	s.corrupt[path] = times
	s.mu.Unlock()
}

// Served is the number of body bytes sent for path so far.
func (s *Server) Served(path string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served[path]
}

// Requests is the number of transfers of path started so far.
func (s *Server) Requests(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[path]
}

// GitBlobID is git's id of a file: sha1 of "blob <size>\x00" + contents.
func GitBlobID(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

// SHA256 is the LFS id of a file.
func SHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func sortedKeys(m map[string][]byte) []string {
	var k []string
	for p := range m {
		k = append(k, p)
	}
	sort.Strings(k)
	return k
}

func hubError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("X-Error-Code", code)
	w.Header().Set("X-Error-Message", msg)
	http.Error(w, fmt.Sprintf(`{"error":%q}`, msg), status)
}

// findRepo splits "org/name/rest" and looks the repository up, answering
// the Hub's error when it is unknown.
func (s *Server) findRepo(w http.ResponseWriter, r *http.Request, p string) (*Repo, string, bool) {
	parts := strings.SplitN(p, "/", 3)
	if len(parts) < 3 {
		http.NotFound(w, r)
		return nil, "", false
	}
	s.mu.Lock()
	repo := s.repos[parts[0]+"/"+parts[1]]
	s.mu.Unlock()
	if repo == nil {
		if token(r) == "" {
			hubError(w, http.StatusUnauthorized, "RepoNotFound", "Repository not found")
		} else {
			hubError(w, http.StatusNotFound, "RepoNotFound", "Repository not found")
		}
		return nil, "", false
	}
	return repo, parts[2], true
}

func token(r *http.Request) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// revision splits "rev/rest" where rev is "main" or the commit.
func (repo *Repo) revision(w http.ResponseWriter, p string) (string, bool) {
	rev, rest, _ := strings.Cut(p, "/")
	if rev != "main" && rev != repo.Commit {
		hubError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return "", false
	}
	return rest, true
}

func (s *Server) serveHub(w http.ResponseWriter, r *http.Request) {
	s.countToken("hub", r)
	p := strings.TrimPrefix(r.URL.Path, "/")
	switch {
	case strings.HasPrefix(p, "api/models/"):
		repo, rest, ok := s.findRepo(w, r, strings.TrimPrefix(p, "api/models/"))
		if !ok {
			return
		}
		kind, rest, _ := strings.Cut(rest, "/")
		rest, ok = repo.revision(w, rest)
		if !ok {
			return
		}
		switch kind {
		case "revision":
			s.serveRevision(w, repo)
		case "tree":
			s.serveTree(w, r, repo, rest)
		default:
			http.NotFound(w, r)
		}
	case strings.Contains(p, "/resolve/"):
		repo, rest, ok := s.findRepo(w, r, p)
		if !ok {
			return
		}
		rest, ok = strings.CutPrefix(rest, "resolve/")
		if !ok {
			http.NotFound(w, r)
			return
		}
		file, ok := repo.revision(w, rest)
		if !ok {
			return
		}
		s.serveResolve(w, r, repo, file)
	default:
		http.NotFound(w, r)
	}
}

func (s *Server) serveRevision(w http.ResponseWriter, repo *Repo) {
	var sib []map[string]string
	for _, p := range sortedKeys(repo.Files) {
		sib = append(sib, map[string]string{"rfilename": p})
	}
	gated := any(false)
	if repo.Gated {
		gated = "manual"
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"_id": repo.Commit[:24], "id": repo.Name, "sha": repo.Commit,
		"siblings": sib, "gated": gated, "private": false, "lastModified": time.Unix(0, 0).UTC()})
}

func (s *Server) serveTree(w http.ResponseWriter, r *http.Request, repo *Repo, dir string) {
	if r.URL.Query().Get("recursive") != "true" || dir != "" {
		http.Error(w, "the fake Hub serves only the recursive tree of the root", http.StatusBadRequest)
		return
	}
	var entries []map[string]any
	dirs := map[string]bool{}
	for _, p := range sortedKeys(repo.Files) {
		for d := p; strings.Contains(d, "/"); {
			d = d[:strings.LastIndex(d, "/")]
			if !dirs[d] {
				dirs[d] = true
				entries = append(entries, map[string]any{"type": "directory", "oid": GitBlobID([]byte(d)), "size": 0, "path": d})
			}
		}
		b := repo.Files[p]
		e := map[string]any{"type": "file", "oid": GitBlobID(b), "size": len(b), "path": p}
		if IsLFS(p) {
			// the git object is the LFS pointer file; "size" is the real size
			e["oid"] = GitBlobID([]byte("version https://git-lfs.github.com/spec/v1\noid sha256:" + SHA256(b) + "\nsize " + strconv.Itoa(len(b)) + "\n"))
			e["lfs"] = map[string]any{"oid": SHA256(b), "size": len(b), "pointerSize": 134}
		}
		entries = append(entries, e)
	}
	start, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	end := min(start+s.PageSize, len(entries))
	if start > len(entries) {
		start = len(entries)
	}
	next := ""
	if end < len(entries) {
		q := r.URL.Query()
		q.Set("cursor", strconv.Itoa(end))
		next = fmt.Sprintf("%s%s?%s", s.Hub.URL, r.URL.Path, q.Encode())
	}
	if s.NextLink != nil {
		next = s.NextLink(s.Hub.URL+r.URL.RequestURI(), next)
	}
	if next != "" {
		w.Header().Set("Link", fmt.Sprintf(`<%s>; rel="next"`, next))
	}
	w.Header().Set("Content-Type", "application/json")
	body, _ := json.Marshal(entries[start:end])
	s.mu.Lock()
	stall, doStall := s.stall[""]
	delete(s.stall, "")
	s.mu.Unlock()
	if doStall {
		s.stallAfter(w, r, body, stall)
		return
	}
	w.Write(body)
}

// stallAfter sends the first n bytes of body, then nothing until the
// client leaves or the server closes.
func (s *Server) stallAfter(w http.ResponseWriter, r *http.Request, body []byte, n int64) {
	w.Write(body[:min(n, int64(len(body)))])
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	select {
	case <-r.Context().Done():
	case <-s.done:
	}
}

func (s *Server) serveResolve(w http.ResponseWriter, r *http.Request, repo *Repo, file string) {
	w.Header().Set("X-Repo-Commit", repo.Commit)
	if repo.Gated && !repo.Granted[token(r)] {
		msg := "Access to model " + repo.Name + " is restricted. You must have access to it and be authenticated to access it. Please log in."
		if token(r) == "" {
			hubError(w, http.StatusUnauthorized, "GatedRepo", msg)
		} else {
			hubError(w, http.StatusForbidden, "GatedRepo", "Access to model "+repo.Name+" is restricted and you are not in the authorized list. Visit https://huggingface.co/"+repo.Name+" to ask for access.")
		}
		return
	}
	b, ok := repo.Files[file]
	if !ok {
		hubError(w, http.StatusNotFound, "EntryNotFound", "Entry not found")
		return
	}
	if IsLFS(file) {
		sum := SHA256(b)
		w.Header().Set("X-Linked-Etag", `"`+sum+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(b)))
		w.Header().Set("ETag", `W/"`+GitBlobID([]byte(file))[:20]+`"`)
		http.Redirect(w, r, s.CDN.URL+"/blobs/"+sum+"?file="+url.QueryEscape(file), http.StatusFound)
		return
	}
	w.Header().Set("ETag", `"`+GitBlobID(b)+`"`)
	s.serveBody(w, r, file, b)
}

func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	s.countToken("cdn", r)
	sum, ok := strings.CutPrefix(r.URL.Path, "/blobs/")
	s.mu.Lock()
	b, found := s.blobs[sum]
	s.mu.Unlock()
	if !ok || !found {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("ETag", `"`+sum+`"`)
	s.serveBody(w, r, r.URL.Query().Get("file"), b)
}

// serveBody answers with b (Range honored), applying the faults set for file.
func (s *Server) serveBody(w http.ResponseWriter, r *http.Request, file string, b []byte) {
	s.mu.Lock()
	cut, doCut := s.cut[file]
	delete(s.cut, file)
	stall, doStall := s.stall[file]
	delete(s.stall, file)
	if s.corrupt[file] > 0 {
		s.corrupt[file]--
		b = bytes.Clone(b)
		b[len(b)/2] ^= 0x55
	}
	if r.Method == http.MethodGet {
		s.requests[file]++
	}
	s.mu.Unlock()
	cw := &countingWriter{ResponseWriter: w, s: s, file: file, limit: -1, stallAt: -1, r: r}
	if doCut {
		cw.limit = cut
	}
	if doStall {
		cw.stallAt = stall
	}
	w.Header().Set("Accept-Ranges", "bytes")
	http.ServeContent(cw, r, "", time.Time{}, bytes.NewReader(b))
}

// countingWriter counts body bytes and drops the connection at limit.
type countingWriter struct {
	http.ResponseWriter
	s     *Server
	file  string
	sent  int64
	limit int64
	// stallAt is the byte count after which nothing more is sent (-1:
	// none); r is the request, whose end releases a stall.
	stallAt int64
	r       *http.Request
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.s.Delay > 0 {
		time.Sleep(c.s.Delay)
	}
	if c.stallAt >= 0 && c.sent+int64(len(p)) > c.stallAt {
		n, _ := c.ResponseWriter.Write(p[:c.stallAt-c.sent])
		c.add(int64(n))
		if f, ok := c.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		select {
		case <-c.r.Context().Done():
		case <-c.s.done:
		}
		return 0, http.ErrAbortHandler
	}
	if c.limit >= 0 && c.sent+int64(len(p)) > c.limit {
		p = p[:c.limit-c.sent]
		c.ResponseWriter.Write(p)
		c.add(int64(len(p)))
		if f, ok := c.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler) // the server closes the connection mid-body
	}
	n, err := c.ResponseWriter.Write(p)
	c.add(int64(n))
	return n, err
}

func (c *countingWriter) add(n int64) {
	c.sent += n
	c.s.mu.Lock()
	c.s.served[c.file] += n
	c.s.mu.Unlock()
}
