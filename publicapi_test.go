package aotlm_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
)

// TestPublicAPINamesNoInternalType checks every public package of the
// module (the root, and every package outside internal/ that is not a
// command): no exported identifier, exported field, exported method or
// their signatures may name a type of an internal package, since a
// program outside the module could not write that type.
func TestPublicAPINamesNoInternalType(t *testing.T) {
	pkgs := publicPackages(t)
	if len(pkgs) < 2 {
		t.Fatalf("found %d public packages, want the root and mobile at least", len(pkgs))
	}
	for _, path := range pkgs {
		pkg := loadTypes(t, path)
		for _, bad := range internalNames(pkg) {
			t.Errorf("%s", bad)
		}
	}
}

// TestInternalNamesFindsLeaks makes sure the check above can fail: a
// package whose API names internal types in each place it looks is
// reported at each of them.
func TestInternalNamesFindsLeaks(t *testing.T) {
	src := `package leak
import "github.com/aotlm/aotlm/internal/sample"
type A = sample.Params
type B struct{ P sample.Params; q sample.Params }
type C interface{ M() *sample.Sampler }
func F(x []sample.Params) {}
var V map[string]sample.Params
type D struct{}
func (D) M() sample.Params { return sample.Params{} }
func (D) m() sample.Params { return sample.Params{} }
type E struct{ B }
`
	pkg := checkSource(t, "leak", src)
	got := internalNames(pkg)
	want := []string{"A", "B.P", "C.M", "D.M", "F", "V"}
	if len(got) != len(want) {
		t.Fatalf("found %d leaks, want %d: %q", len(got), len(want), got)
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], "leak."+w+":") {
			t.Errorf("leak %d is %q, want it about %s", i, got[i], w)
		}
	}
}

// publicPackages lists the module's packages outside internal/ that are
// not commands.
func publicPackages(t *testing.T) []string {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{.Name}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, name, _ := strings.Cut(line, " ")
		if name == "main" || strings.Contains(path+"/", "/internal/") {
			continue
		}
		pkgs = append(pkgs, path)
	}
	return pkgs
}

// loadTypes type-checks a package from the compiler's export data.
func loadTypes(t *testing.T, path string) *types.Package {
	out, err := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export", path).Output()
	if err != nil {
		t.Fatalf("go list -export %s: %v", path, err)
	}
	exports := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		exports[p.ImportPath] = p.Export
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(p string) (io.ReadCloser, error) {
		f, ok := exports[p]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", p)
		}
		return os.Open(f)
	})
	pkg, err := imp.Import(path)
	if err != nil {
		t.Fatalf("import %s: %v", path, err)
	}
	return pkg
}

// internalNames returns, sorted, a line for each exported place of pkg's
// API that names a type of an internal package.
func internalNames(pkg *types.Package) []string {
	var bad []string
	report := func(where string, typ types.Type) {
		if n := internalIn(typ, map[types.Type]bool{}); n != "" {
			bad = append(bad, fmt.Sprintf("%s.%s: names %s", pkg.Name(), where, n))
		}
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		tn, isType := obj.(*types.TypeName)
		if !isType || tn.IsAlias() {
			report(name, obj.Type())
			continue
		}
		named, ok := obj.Type().(*types.Named)
		if !ok {
			continue
		}
		switch u := named.Underlying().(type) {
		case *types.Struct:
			for i := range u.NumFields() {
				f := u.Field(i)
				if f.Exported() && !f.Embedded() {
					report(name+"."+f.Name(), f.Type())
				}
			}
		case *types.Interface:
			for i := range u.NumMethods() {
				if m := u.Method(i); m.Exported() {
					report(name+"."+m.Name(), m.Type())
				}
			}
		default:
			report(name, u)
		}
		for i := range named.NumMethods() {
			if m := named.Method(i); m.Exported() {
				report(name+"."+m.Name(), m.Type())
			}
		}
	}
	sort.Strings(bad)
	return bad
}

// internalIn returns the first internal named type typ mentions, or "".
// Named types of other packages are not entered: a public one is checked
// as part of its own package.
func internalIn(typ types.Type, seen map[types.Type]bool) string {
	if seen[typ] {
		return ""
	}
	seen[typ] = true
	switch t := typ.(type) {
	case *types.Named:
		if p := t.Obj().Pkg(); p != nil && strings.Contains(p.Path()+"/", "/internal/") {
			return t.String()
		}
		for i := range t.TypeArgs().Len() {
			if n := internalIn(t.TypeArgs().At(i), seen); n != "" {
				return n
			}
		}
		return ""
	case *types.Alias:
		return internalIn(types.Unalias(t), seen)
	case *types.Pointer:
		return internalIn(t.Elem(), seen)
	case *types.Slice:
		return internalIn(t.Elem(), seen)
	case *types.Array:
		return internalIn(t.Elem(), seen)
	case *types.Map:
		if n := internalIn(t.Key(), seen); n != "" {
			return n
		}
		return internalIn(t.Elem(), seen)
	case *types.Chan:
		return internalIn(t.Elem(), seen)
	case *types.Signature:
		for _, tup := range []*types.Tuple{t.Params(), t.Results()} {
			for i := range tup.Len() {
				if n := internalIn(tup.At(i).Type(), seen); n != "" {
					return n
				}
			}
		}
		return ""
	case *types.Struct:
		for i := range t.NumFields() {
			if f := t.Field(i); f.Exported() {
				if n := internalIn(f.Type(), seen); n != "" {
					return n
				}
			}
		}
		return ""
	case *types.Interface:
		for i := range t.NumMethods() {
			if m := t.Method(i); m.Exported() {
				if n := internalIn(m.Type(), seen); n != "" {
					return n
				}
			}
		}
		return ""
	}
	return ""
}

// checkSource type-checks one file as package name (for the self-test),
// its imports read from export data.
func checkSource(t *testing.T, name, src string) *types.Package {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/leak.go", []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	imports := loadTypes(t, "github.com/aotlm/aotlm/internal/sample")
	fset := token.NewFileSet()
	f, err := parseFile(fset, dir+"/leak.go")
	if err != nil {
		t.Fatal(err)
	}
	conf := types.Config{Importer: importerFunc(func(p string) (*types.Package, error) {
		if p == imports.Path() {
			return imports, nil
		}
		return nil, fmt.Errorf("unexpected import %s", p)
	})}
	pkg, err := conf.Check(name, fset, f, nil)
	if err != nil {
		t.Fatalf("type-check: %v", err)
	}
	return pkg
}

func parseFile(fset *token.FileSet, path string) ([]*ast.File, error) {
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		return nil, err
	}
	return []*ast.File{f}, nil
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }
