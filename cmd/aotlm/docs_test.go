package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/aotlm/aotlm/internal/compile"
	"github.com/aotlm/aotlm/internal/testutil"
)

// The documentation's commands are tested: TestDocCommands runs every
// shell block of README.md and docs/**/*.md (docs/lab included), so a
// command that stops working fails CI. Links, file references and Go
// blocks are checked by docs_refs_test.go, whose comment gives their
// convention. The convention, which docs/usage.md states for writers:
//
//   - A command a reader can type is in a fenced block: ```sh. Such a block
//     is run, in order with the file's other ```sh blocks, by one bash
//     (set -euo pipefail), in a fresh folder beside a link to the shared
//     test data (so ../shared/testdata/... resolves), with the built binary
//     on PATH as aotlm and copied there as ./aotlm, a temporary AOTLM_CACHE,
//     and a stand-in for the go tool that runs `go run ./cmd/aotlm ARGS` as
//     `aotlm ARGS` and `go build -o NAME ./cmd/aotlm` as a copy of the
//     binary, and `go tool pprof` runs (any other go command fails: mark
//     its block).
//   - A block that cannot run in CI (outside tools such as llama.cpp, long
//     benchmarks, large models, the network) says so in its info string:
//     ```sh skip-ci: REASON. The reason is required; the test logs every
//     skipped block.
//   - A synopsis (placeholders in CAPITALS, options in [brackets]) is a
//     ```text block; a command line in a text block without a placeholder
//     or bracket is refused, as is a command in an indented code block, so
//     no runnable command escapes the test silently.

// docBlock is one fenced code block of a Markdown file.
type docBlock struct {
	File string
	Line int    // line of the opening fence, from 1
	Lang string // first word of the info string
	Skip string // the reason after "skip-ci:" (```sh) or "fragment:" (```go); "" when the block runs or compiles
	Text string
}

// commandWord matches a line that starts a shell command (after an
// optional "$ " prompt and VAR=value assignments).
var commandWord = regexp.MustCompile(`^(\$ )?([A-Z_][A-Z0-9_]*=\S* )*(aotlm|\./aotlm|go|bash|sh|cmake|make|git|curl|python3?|llama-[a-z-]+|\./[a-z]+)( |$)`)

// placeholder matches what makes a line a synopsis: [options] or a
// CAPITALS placeholder.
var placeholder = regexp.MustCompile(`\[|\b[A-Z][A-Z_]{2,}\b`)

// parseDoc returns the fenced blocks of a Markdown file and the problems
// that break the convention above.
func parseDoc(name, md string) (blocks []docBlock, problems []string) {
	lines := strings.Split(md, "\n")
	bad := func(line int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: ", name, line)+fmt.Sprintf(format, args...))
	}
	prevBlank := true
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "```") {
			info := strings.TrimSpace(strings.TrimPrefix(l, "```"))
			b := docBlock{File: name, Line: i + 1}
			b.Lang, _, _ = strings.Cut(info, " ")
			rest := strings.TrimSpace(strings.TrimPrefix(info, b.Lang))
			var body []string
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
				body = append(body, lines[i])
			}
			if i == len(lines) {
				bad(b.Line, "code block is not closed")
			}
			b.Text = strings.Join(body, "\n") + "\n"
			switch b.Lang {
			case "sh":
				if rest != "" {
					reason, ok := strings.CutPrefix(rest, "skip-ci:")
					b.Skip = strings.TrimSpace(reason)
					if !ok || b.Skip == "" {
						bad(b.Line, "```sh takes nothing or \"skip-ci: REASON\", not %q", rest)
					}
				}
			case "go":
				if rest != "" {
					reason, ok := strings.CutPrefix(rest, "fragment:")
					b.Skip = strings.TrimSpace(reason)
					if !ok || b.Skip == "" {
						bad(b.Line, "```go takes nothing (a complete file) or \"fragment: REASON\", not %q", rest)
					}
				}
			case "bash", "shell", "console":
				bad(b.Line, "write shell commands as ```sh")
			default:
				for j, c := range body {
					if commandWord.MatchString(strings.TrimSpace(c)) && !placeholder.MatchString(c) {
						bad(b.Line+1+j, "a command in a ```%s block: put it in a ```sh block (or write a synopsis with placeholders)", b.Lang)
					}
				}
			}
			blocks = append(blocks, b)
			prevBlank = false
			continue
		}
		if (strings.HasPrefix(l, "    ") || strings.HasPrefix(l, "\t")) && prevBlank {
			// an indented code block: it runs to the next non-indented line
			for ; i < len(lines) && (strings.HasPrefix(lines[i], "    ") || strings.HasPrefix(lines[i], "\t") || strings.TrimSpace(lines[i]) == ""); i++ {
				if commandWord.MatchString(strings.TrimSpace(lines[i])) {
					bad(i+1, "a command in an indented code block: fence it as ```sh (or ```text for a synopsis)")
				}
			}
			i--
			prevBlank = true
			continue
		}
		prevBlank = strings.TrimSpace(l) == ""
	}
	return blocks, problems
}

// goStandIn is the go tool the documented commands see.
const goStandIn = `#!/usr/bin/env bash
# Stands in for the go tool in documented commands (see cmd/aotlm/docs_test.go).
if [ "${1:-}" = run ] && [ "${2:-}" = ./cmd/aotlm ]; then shift 2; exec aotlm "$@"; fi
if [ "$#" = 4 ] && [ "$1" = build ] && [ "$2" = -o ] && [ "$4" = ./cmd/aotlm ]; then exec cp "$(command -v aotlm)" "$3"; fi
if [ "${1:-}" = tool ] && [ "${2:-}" = pprof ]; then exec "$AOTLM_DOCS_GO" "$@"; fi
echo "docs test: 'go $*' is not run by the docs test (only go run/build ./cmd/aotlm and go tool pprof); mark its block skip-ci: REASON" >&2
exit 127
`

// blockDone is the marker printed after each block that succeeded.
const blockDone = "@@docs-test-block-done "

// runDocBlocks runs the runnable blocks of one file, in order, in one bash
// in a fresh folder (see the convention above). It returns the combined
// output and, on failure, an error naming the block that failed.
func runDocBlocks(t *testing.T, bin, testdata string, blocks []docBlock) (string, error) {
	t.Helper()
	root := t.TempDir()
	work, tools := filepath.Join(root, "work"), filepath.Join(root, "bin")
	for _, d := range []string{work, tools, filepath.Join(root, "shared"), filepath.Join(root, "cache")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if testdata != "" {
		if err := os.Symlink(testdata, filepath.Join(root, "shared", "testdata")); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, bin, filepath.Join(tools, "aotlm"))
	copyFile(t, bin, filepath.Join(work, "aotlm"))
	if err := os.WriteFile(filepath.Join(tools, "go"), []byte(goStandIn), 0o755); err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	var run []docBlock
	for _, b := range blocks {
		if b.Lang != "sh" || b.Skip != "" {
			continue
		}
		fmt.Fprintf(&script, "%s\nprintf '\\n%s%d\\n'\n", b.Text, blockDone, len(run))
		run = append(run, b)
	}
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = work
	realGo, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "PATH="+tools+string(os.PathListSeparator)+os.Getenv("PATH"),
		compile.CacheEnv+"="+filepath.Join(root, "cache"), "AOTLM_DOCS_GO="+realGo)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err == nil {
		return out.String(), nil
	}
	failed := 0
	if k := strings.LastIndex(out.String(), blockDone); k >= 0 {
		fmt.Sscanf(out.String()[k+len(blockDone):], "%d", &failed)
		failed++
	}
	if failed >= len(run) {
		return out.String(), fmt.Errorf("the documented commands failed")
	}
	b := run[failed]
	return out.String(), fmt.Errorf("%s:%d: the block failed:\n%s", b.File, b.Line, b.Text)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// docFiles returns README.md and docs/**/*.md (docs/lab's notes
// included), relative to the repository root.
func docFiles(t *testing.T) []string {
	t.Helper()
	return markdownFiles(t)
}

// TestDocCommands runs the commands of README.md and docs/**/*.md (see the
// convention at the top of this file) and fails on any that exits
// non-zero, naming the file and line of its block.
func TestDocCommands(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	testdata := filepath.Dir(filepath.Dir(filepath.Dir(testutil.Path(t, "models/stories260K/stories260K.gguf"))))
	testdata, err := filepath.Abs(testdata)
	if err != nil {
		t.Fatal(err)
	}
	bin := aotlmBinary(t)
	for _, name := range docFiles(t) {
		md, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), name))
		if err != nil {
			t.Fatal(err)
		}
		blocks, problems := parseDoc(name, string(md))
		for _, p := range problems {
			t.Error(p)
		}
		for _, b := range blocks {
			if b.Skip != "" {
				t.Logf("%s:%d: not run (skip-ci: %s)", b.File, b.Line, b.Skip)
			}
		}
		t.Run(name, func(t *testing.T) {
			if out, err := runDocBlocks(t, bin, testdata, blocks); err != nil {
				t.Errorf("%v\noutput:\n%s", err, tail(out, 40))
			}
		})
	}
}

// TestDocRunnerCatchesBrokenCommands: the runner fails on a broken
// command and names its block, passes a working one, and the parser
// refuses commands that would escape the test.
func TestDocRunnerCatchesBrokenCommands(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	bin := aotlmBinary(t)
	md := "# Doc\n\n```sh\ngo run ./cmd/aotlm version\n```\n\ntext\n\n```sh\naotlm run -p \"x\" -n 2 --no-such-flag\n```\n\n```sh skip-ci: not runnable here\nllama-bench -m x.gguf\n```\n"
	blocks, problems := parseDoc("doc.md", md)
	if len(problems) != 0 || len(blocks) != 3 || blocks[2].Skip != "not runnable here" {
		t.Fatalf("parse: %d blocks, problems %v", len(blocks), problems)
	}
	out, err := runDocBlocks(t, bin, "", blocks)
	if err == nil || !strings.Contains(err.Error(), "doc.md:9:") || !strings.Contains(out, "aotlm dev") {
		t.Fatalf("a broken command: error %v, output %q", err, out)
	}
	if _, err := runDocBlocks(t, bin, "", blocks[:1]); err != nil {
		t.Fatalf("a working command failed: %v", err)
	}
	// a go command other than run/build of ./cmd/aotlm is refused
	if _, err := runDocBlocks(t, bin, "", []docBlock{{File: "d.md", Line: 1, Lang: "sh", Text: "go test ./...\n"}}); err == nil {
		t.Fatal("go test ran in a documented block")
	}

	// the README's own first command, broken, fails and is named
	md2, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme, _ := parseDoc("README.md", string(md2))
	var first *docBlock
	for i := range readme {
		if readme[i].Lang == "sh" && readme[i].Skip == "" && strings.Contains(readme[i].Text, " run ") {
			first = &readme[i]
			break
		}
	}
	if first == nil {
		t.Fatal("README.md has no runnable block with a run command")
	}
	broken := *first
	broken.Text = strings.Replace(broken.Text, " run ", " run --no-such-flag ", 1)
	if _, err := runDocBlocks(t, bin, "", []docBlock{broken}); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("README.md:%d:", first.Line)) {
		t.Fatalf("a broken README command: error %v", err)
	}
	if _, err := runDocBlocks(t, bin, "", []docBlock{*first}); err != nil {
		t.Fatalf("the README's first run command, without the shared test data: %v", err)
	}

	for _, c := range []struct{ md, want string }{
		{"text\n\n    aotlm run -p x\n", "indented"},
		{"```text\naotlm run -m m.gguf -p x\n```\n", "```text block"},
		{"```sh skip-ci:\nllama-bench\n```\n", "skip-ci"},
		{"```sh skip\nllama-bench\n```\n", "skip-ci"},
		{"```bash\naotlm version\n```\n", "```sh"},
		{"```sh\naotlm version\n", "not closed"},
	} {
		if _, problems := parseDoc("d.md", c.md); len(problems) != 1 || !strings.Contains(problems[0], c.want) {
			t.Errorf("%q: problems %v, want one mentioning %q", c.md, problems, c.want)
		}
	}
	// synopses and prose are not commands
	ok := "intro\n\n```text\naotlm run -m MODEL [-n N]\n```\n\n    internal/foo   what it does\n\n```json\n{\"a\": 1}\n```\n"
	if _, problems := parseDoc("d.md", ok); len(problems) != 0 {
		t.Errorf("problems in a valid doc: %v", problems)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// aotlmBinary builds the aotlm binary once per test run.
func aotlmBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "aotlm-bin-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "aotlm")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// removeBinary deletes the binary aotlmBinary built (TestMain calls it).
func removeBinary() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}
