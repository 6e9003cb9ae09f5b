package main

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/aotlm/aotlm/internal/testutil"
)

// The documentation's references are tested too (see also the convention
// at the top of docs_test.go), on README.md and every docs/**/*.md:
//
//   - Links. Every relative Markdown link [text](path) or
//     [text](path#anchor) outside code blocks names a file or folder of
//     the repository, and an anchor names a heading of the Markdown file
//     it points at (GitHub's slugs: lower case, punctuation dropped,
//     spaces as hyphens, -1, -2 for repeats). Links with a scheme
//     (https:, mailto:) are not followed.
//   - File references. An inline code span that is a repository path
//     (starting with internal/, cmd/, docs/, scripts/, mobile/ or serve/,
//     or a path ending in .go or .md) names a file or folder that exists:
//     from the repository root, or from the doc's own folder. A span with
//     a placeholder (CAPITALS, *, <, {, ...) is not a reference.
//   - Go blocks. A ```go block is a complete file that starts with its
//     package clause (comments before it allowed). Every such block is
//     compiled (go vet) in a module outside this one that requires
//     github.com/aotlm/aotlm and replaces it with this checkout, so only
//     the public API is usable, as in a user's program. A block that
//     cannot be a complete file says so in its info string:
//     ```go fragment: REASON. The reason is required and the test logs
//     every fragment; keep them rare (a signature list or a synopsis is a
//     ```text block).

// markdownFiles returns README.md and every .md file under docs/,
// relative to the repository root, with forward slashes.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	root := testutil.RepoRoot()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// proseLines returns the lines of md outside fenced code blocks (a line
// inside one is ""), so that line numbers stay those of the file.
func proseLines(md string) []string {
	lines := strings.Split(md, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(l, "```") {
			in = !in
			lines[i] = ""
			continue
		}
		if in {
			lines[i] = ""
		}
	}
	return lines
}

// headingSlugs returns the GitHub anchors of md's headings.
func headingSlugs(md string) map[string]bool {
	slugs := map[string]bool{}
	seen := map[string]int{}
	for _, l := range proseLines(md) {
		if !strings.HasPrefix(l, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(l, "#"))
		s := slug(text)
		if n := seen[s]; n > 0 {
			slugs[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			slugs[s] = true
		}
		seen[s]++
	}
	return slugs
}

// slug is GitHub's anchor of a heading: lower case, letters, digits,
// spaces, hyphens and underscores kept, spaces as hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// mdLink matches a Markdown link or image and captures its target.
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// checkLinks returns the dead relative links of the Markdown file name
// (relative to root), whose text is md.
func checkLinks(root, name, md string) []string {
	var problems []string
	for i, l := range proseLines(md) {
		for _, m := range mdLink.FindAllStringSubmatch(stripCodeSpans(l), -1) {
			target := m[1]
			if strings.Contains(target, ":") && !strings.HasPrefix(target, "#") {
				continue // a scheme: https:, mailto:
			}
			path, anchor, _ := strings.Cut(target, "#")
			file := filepath.Join(root, filepath.FromSlash(name))
			if path != "" {
				file = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				if !strings.HasPrefix(file, root) {
					problems = append(problems, fmt.Sprintf("%s:%d: link %q leaves the repository", name, i+1, target))
					continue
				}
				if _, err := os.Stat(file); err != nil {
					problems = append(problems, fmt.Sprintf("%s:%d: dead link %q: no such file", name, i+1, target))
					continue
				}
			}
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			b, err := os.ReadFile(file)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s:%d: link %q: %v", name, i+1, target, err))
				continue
			}
			if !headingSlugs(string(b))[anchor] {
				problems = append(problems, fmt.Sprintf("%s:%d: dead link %q: no heading with anchor #%s", name, i+1, target, anchor))
			}
		}
	}
	return problems
}

// codeSpan matches an inline code span.
var codeSpan = regexp.MustCompile("`[^`]+`")

// stripCodeSpans blanks the inline code spans of a line, so that a link
// written as code is not followed.
func stripCodeSpans(l string) string {
	return codeSpan.ReplaceAllStringFunc(l, func(s string) string { return strings.Repeat(" ", len(s)) })
}

// repoPath matches a code span that is meant as a repository path.
var repoPath = regexp.MustCompile(`^(\./)?((internal|cmd|docs|scripts|mobile|serve)/[A-Za-z0-9_./-]*|[A-Za-z0-9_./-]+\.(go|md))$`)

// notAPath matches what makes a span a pattern rather than a path:
// placeholders in capitals, globs and elisions.
var notAPath = regexp.MustCompile(`[A-Z]{3,}|\*|\.\.\.|<|\{`)

// checkFileRefs returns the code spans of md that name repository paths
// that do not exist. goFiles holds the base names of the repository's .go
// files: a bare file name (no folder) is found by name.
func checkFileRefs(root, name, md string, goFiles map[string]bool) []string {
	var problems []string
	dir := filepath.Dir(filepath.Join(root, filepath.FromSlash(name)))
	for i, l := range proseLines(md) {
		for _, span := range codeSpan.FindAllString(l, -1) {
			p := strings.Trim(span, "`")
			if !repoPath.MatchString(p) || notAPath.MatchString(p) {
				continue
			}
			p = strings.TrimPrefix(p, "./")
			if !strings.Contains(strings.TrimSuffix(p, "/"), "/") && strings.HasSuffix(p, ".go") {
				if !goFiles[p] {
					problems = append(problems, fmt.Sprintf("%s:%d: %s: no such Go file in the repository", name, i+1, span))
				}
				continue
			}
			if exists(filepath.Join(root, filepath.FromSlash(p))) || exists(filepath.Join(dir, filepath.FromSlash(p))) {
				continue
			}
			problems = append(problems, fmt.Sprintf("%s:%d: %s: no such file or folder", name, i+1, span))
		}
	}
	return problems
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// repoGoFiles returns the base names of the .go files under root.
func repoGoFiles(t *testing.T, root string) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			names[d.Name()] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestDocLinks fails on a dead relative link or a dead file reference in
// README.md or docs/**/*.md (see the convention above).
func TestDocLinks(t *testing.T) {
	root := testutil.RepoRoot()
	goFiles := repoGoFiles(t, root)
	for _, name := range markdownFiles(t) {
		md, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range checkLinks(root, name, string(md)) {
			t.Error(p)
		}
		for _, p := range checkFileRefs(root, name, string(md), goFiles) {
			t.Error(p)
		}
	}
}

// TestDocLinksCatchDeadOnes: the checks find a dead link, a dead anchor
// and a dead file reference, and pass live ones.
func TestDocLinksCatchDeadOnes(t *testing.T) {
	root := t.TempDir()
	for name, text := range map[string]string{
		"docs/a.md":            "# A\n\n## Two words, `code` (x)\n\n## Two words, code x\n",
		"internal/pkg/file.go": "package pkg\n",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goFiles := map[string]bool{"file.go": true}
	for _, c := range []struct {
		md   string
		want string // "" when the text has no problem
	}{
		{"see [a](a.md) and [b](../docs/a.md#a)", ""},
		{"[x](a.md#two-words-code-x)", ""},
		{"[x](a.md#two-words-code-x-1)", ""},
		{"[x](https://example.com/nothing.md) [y](#local)", "#local"},
		{"[x](missing.md)", "no such file"},
		{"[x](a.md#no-such-heading)", "no heading"},
		{"`internal/pkg/file.go` and `internal/pkg/` and `a.md` and `file.go`", ""},
		{"`internal/pkg/gone.go`", "no such file"},
		{"`docs/missing.md`", "no such file"},
		{"`other.go`", "no such Go file"},
		{"`internal/pkg/NAME.go` `internal/...` `./cmd/...` `docs/*.md`", ""},
		{"```sh\n[x](missing.md) `docs/missing.md`\n```\n", ""},
		{"`[x](missing.md)`", ""},
	} {
		problems := append(checkLinks(root, "docs/b.md", c.md), checkFileRefs(root, "docs/b.md", c.md, goFiles)...)
		switch {
		case c.want == "" && len(problems) != 0:
			t.Errorf("%q: problems %v, want none", c.md, problems)
		case c.want != "" && (len(problems) != 1 || !strings.Contains(problems[0], c.want)):
			t.Errorf("%q: problems %v, want one mentioning %q", c.md, problems, c.want)
		}
	}
}

// packageClause matches a Go file's package clause at the start of a
// line.
var packageClause = regexp.MustCompile(`(?m)^package [A-Za-z_][A-Za-z0-9_]*\s*$`)

// isCompleteGoFile reports whether a ```go block starts with its package
// clause, after blank lines and comments.
func isCompleteGoFile(src string) bool {
	for _, l := range strings.Split(src, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "//") {
			continue
		}
		return packageClause.MatchString(l)
	}
	return false
}

// TestDocGoBlocks compiles every complete ```go block of README.md and
// docs/**/*.md against the public API (see the convention above) and
// fails on a block that is neither complete nor a marked fragment.
func TestDocGoBlocks(t *testing.T) {
	root := testutil.RepoRoot()
	files := map[string]string{}
	where := map[string]string{}
	for _, name := range markdownFiles(t) {
		md, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		blocks, _ := parseDoc(name, string(md))
		for _, b := range blocks {
			if b.Lang != "go" {
				continue
			}
			switch {
			case b.Skip != "":
				t.Logf("%s:%d: not compiled (fragment: %s)", b.File, b.Line, b.Skip)
			case isCompleteGoFile(b.Text):
				dir := fmt.Sprintf("block%d", len(files))
				files[dir+"/main.go"] = b.Text
				where[dir] = fmt.Sprintf("%s:%d", b.File, b.Line)
			default:
				t.Errorf("%s:%d: a ```go block is a complete file starting with its package clause, or ```go fragment: REASON", b.File, b.Line)
			}
		}
	}
	if len(files) == 0 {
		return
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go tool is not installed")
	}
	out, err := testutil.GoOutside(t, files, "vet", "./...")
	if err != nil {
		for dir, at := range where {
			out = strings.ReplaceAll(out, dir+"/main.go", at+" (block)")
		}
		t.Errorf("the documented Go programs do not compile against the public API: %v\n%s", err, out)
	}
}

// TestDocGoBlocksCatchBrokenOnes: a complete program that uses the
// public API compiles outside the module; one that imports an internal
// package or does not type-check fails.
func TestDocGoBlocksCatchBrokenOnes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds programs in a module of their own")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go tool is not installed")
	}
	ok := "package main\n\nimport \"github.com/aotlm/aotlm\"\n\nfunc main() { _ = aotlm.Open }\n"
	if out, err := testutil.GoOutside(t, map[string]string{"ok/main.go": ok}, "vet", "./..."); err != nil {
		t.Fatalf("a program on the public API: %v\n%s", err, out)
	}
	internal := "package main\n\nimport \"github.com/aotlm/aotlm/internal/kernel\"\n\nfunc main() { _ = kernel.Active }\n"
	if out, err := testutil.GoOutside(t, map[string]string{"internal/main.go": internal}, "vet", "./..."); err == nil || !strings.Contains(out, "internal") {
		t.Errorf("a program importing an internal package compiled: %v\n%s", err, out)
	}
	broken := "package main\n\nimport \"github.com/aotlm/aotlm\"\n\nfunc main() { aotlm.NoSuchFunction() }\n"
	if _, err := testutil.GoOutside(t, map[string]string{"broken/main.go": broken}, "vet", "./..."); err == nil {
		t.Error("a program calling a missing function compiled")
	}
	for _, c := range []struct {
		src  string
		want bool
	}{
		{"// Command x.\npackage main\n", true},
		{"\npackage main\n\nfunc main() {}\n", true},
		{"m, err := aotlm.Open(\"x\")\n", false},
		{"func Open() {}\n", false},
	} {
		if got := isCompleteGoFile(c.src); got != c.want {
			t.Errorf("isCompleteGoFile(%q) = %v", c.src, got)
		}
	}
	if _, problems := parseDoc("d.md", "```go fragment:\nx := 1\n```\n"); len(problems) != 1 {
		t.Errorf("a fragment without a reason: problems %v", problems)
	}
	if blocks, problems := parseDoc("d.md", "```go fragment: a signature\nx := 1\n```\n"); len(problems) != 0 || blocks[0].Skip != "a signature" {
		t.Errorf("a fragment with a reason: problems %v", problems)
	}
}
