package vlm

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/aotlm/aotlm/internal/arch"
)

// TestEveryFamilyHasEveryHook: each vision family arch recognizes has a
// runtime here, with every hook set, and nothing else is registered.
func TestEveryFamilyHasEveryHook(t *testing.T) {
	if len(arch.VisionFamilies()) < 2 {
		t.Fatalf("%d vision families registered in arch, want SmolVLM's and Qwen2-VL's", len(arch.VisionFamilies()))
	}
	for _, af := range arch.VisionFamilies() {
		if af.Name == "" || af.IsHF == nil || len(af.Projectors) == 0 {
			t.Errorf("arch vision family %+v: a field is unset", af)
		}
		f, err := familyNamed(af.Name)
		if err != nil {
			t.Error(err)
			continue
		}
		v := reflect.ValueOf(*f)
		for i := range v.NumField() {
			if v.Field(i).IsZero() {
				t.Errorf("vlm family %s: %s is unset", af.Name, v.Type().Field(i).Name)
			}
		}
	}
	if len(Families()) != len(arch.VisionFamilies()) {
		t.Errorf("%d vlm families for %d arch vision families", len(Families()), len(arch.VisionFamilies()))
	}
}

// familyToken matches the name of a vision family inside an identifier.
var familyToken = regexp.MustCompile(`(?i)qwen2vl|qwen25vl|qwen2_5_vl|idefics|smolvlm|internvl`)

// TestNoFamilyTestsOutsideFamilyFiles: outside the files of a family
// (whose names carry the family's, one per layer), no code names a vision
// family: no identifier such as IsQwen2VL and no family name as a string
// ("qwen2vl"), so that what differs between families goes through the
// registries.
func TestNoFamilyTestsOutsideFamilyFiles(t *testing.T) {
	root := moduleRoot(t)
	names := map[string]bool{}
	for _, f := range arch.VisionFamilies() {
		names[f.Name] = true
	}
	names["smolvlm"], names["qwen25vl"] = true, true // the text families of the vision models
	scanned := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (n == "testdata" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		base := d.Name()
		if !strings.HasSuffix(base, ".go") || strings.HasSuffix(base, "_test.go") || familyToken.MatchString(base) {
			return nil
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		scanned++
		rel, _ := filepath.Rel(root, path)
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				if familyToken.MatchString(n.Name) {
					t.Errorf("%s:%d: %s names a vision family outside its files", rel, fset.Position(n.Pos()).Line, n.Name)
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					if s, err := strconv.Unquote(n.Value); err == nil && names[s] {
						t.Errorf("%s:%d: the family name %q outside its files", rel, fset.Position(n.Pos()).Line, s)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 100 {
		t.Fatalf("scanned %d source files under %s, want the module's", scanned, root)
	}
}

// moduleRoot is the directory of go.mod above the test's.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = up
	}
}
