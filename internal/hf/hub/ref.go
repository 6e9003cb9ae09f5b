package hub

import (
	"fmt"
	"regexp"
	"strings"
)

// Ref names what to pull: a repository, a revision (branch, tag or commit;
// "main" when empty) and, for repositories of GGUF files, a quantization tag
// that picks one of them ("Q4_K_M").
type Ref struct {
	Repo     string
	Revision string
	Quant    string
}

// refPattern is org/name[@revision][:QUANT]. Repository names on the Hub
// use letters, digits, '-', '_' and '.'; revisions may hold '/' (refs/pr/1).
var refPattern = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*)(@[A-Za-z0-9._/-]+)?(:[A-Za-z0-9._-]+)?$`)

// LooksLikeRef reports whether s has the shape of a repository reference.
// A path that exists on disk should be preferred by the caller: "a/b" is
// both a relative path and a repository id. Names ending in a model file
// extension (dir/model.gguf) are taken for paths.
func LooksLikeRef(s string) bool {
	if !refPattern.MatchString(s) {
		return false
	}
	for _, ext := range []string{".gguf", ".aot", ".bin", ".safetensors", ".json", ".pth", ".pt"} {
		if strings.HasSuffix(strings.ToLower(s), ext) {
			return false
		}
	}
	repo := refPattern.FindStringSubmatch(s)[1]
	for _, part := range strings.Split(repo, "/") {
		if part == "." || part == ".." || strings.Contains(part, "..") {
			return false
		}
	}
	return true
}

// ParseRef reads org/name[@revision][:QUANT].
func ParseRef(s string) (Ref, error) {
	if !LooksLikeRef(s) {
		return Ref{}, fmt.Errorf("%q is not a Hub repository reference (want org/name[@revision][:QUANT])", s)
	}
	m := refPattern.FindStringSubmatch(s)
	r := Ref{Repo: m[1], Revision: strings.TrimPrefix(m[2], "@"), Quant: strings.TrimPrefix(m[3], ":")}
	if strings.Contains(r.Revision, "..") {
		return Ref{}, fmt.Errorf("revision %q: '..' is not allowed", r.Revision)
	}
	return r, nil
}

// String gives the reference back in org/name[@revision][:QUANT] form.
func (r Ref) String() string {
	s := r.Repo
	if r.Revision != "" {
		s += "@" + r.Revision
	}
	if r.Quant != "" {
		s += ":" + r.Quant
	}
	return s
}

func (r Ref) revision() string {
	if r.Revision == "" {
		return "main"
	}
	return r.Revision
}

var commitPattern = regexp.MustCompile(`^[0-9a-f]{40}$`)

// isCommit reports whether rev is a full commit hash.
func isCommit(rev string) bool { return commitPattern.MatchString(rev) }
