package test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The composition root (package daemon) gives each resource what it needs when it makes
// it: constructor parameters, a Deps struct, interfaces the consumer owns. A function or
// interface field of a constructed type that someone fills in after construction hides a
// dependency from the constructor (and puts a nil check at every use); the check below
// finds every such assignment, and every literal of the type that sets one, outside the
// package's New* functions.

// constructed are the types the composition root makes with a constructor, by package
// (module-relative): their exported fields of function or interface type, or of a struct
// type carrying such fields, are set by the package's New* functions only.
var constructed = map[string]string{
	"daemon/cluster":    "Service",
	"daemon/converge":   "Service",
	"daemon/deployment": "Service",
	"daemon/images":     "Service",
	"daemon/join":       "Service",
	"daemon/launch":     "Service",
	"daemon/members":    "Service",
	"daemon/node":       "Node",
	"daemon/storage":    "Service",
}

// lateWiring type-checks sources (module-relative path -> Go source; packages outside the
// module are stand-ins without declarations, so only the module's own types are known)
// and returns every place that sets a behaviour field of a constructed type outside its
// package's constructors, sorted (pure).
func lateWiring(sources map[string][]byte, constructed map[string]string) ([]string, error) {
	l, err := newSrcLoader(sources)
	if err != nil {
		return nil, err
	}
	// fields: owner "path.Type" -> its behaviour fields.
	fields := map[string]map[string]bool{}
	for rel, name := range constructed {
		p := l.pkg(module + "/" + rel)
		obj := p.Scope().Lookup(name)
		if obj == nil {
			return nil, fmt.Errorf("constructed type %s.%s not found: update constructed", rel, name)
		}
		st, ok := obj.Type().Underlying().(*types.Struct)
		if !ok {
			return nil, fmt.Errorf("constructed type %s.%s is not a struct", rel, name)
		}
		set := map[string]bool{}
		for i := range st.NumFields() {
			if f := st.Field(i); f.Exported() && carriesBehaviour(f.Type(), 0) {
				set[f.Name()] = true
			}
		}
		fields[p.Path()+"."+name] = set
	}
	var out []string
	for _, v := range l.variants() {
		out = append(out, v.scan(l.fset, fields)...)
	}
	sort.Strings(out)
	return out, nil
}

// carriesBehaviour says whether a field of type t holds behaviour given from outside: a
// function, a non-empty interface (not error), or a struct with such exported fields.
func carriesBehaviour(t types.Type, depth int) bool {
	if depth > 4 || t == types.Universe.Lookup("error").Type() {
		return false
	}
	switch u := t.Underlying().(type) {
	case *types.Signature:
		return true
	case *types.Interface:
		return u.NumMethods() > 0
	case *types.Struct:
		for i := range u.NumFields() {
			if f := u.Field(i); f.Exported() && carriesBehaviour(f.Type(), depth+1) {
				return true
			}
		}
	}
	return false
}

// srcLoader type-checks the module's packages from source; imports from outside the
// module are empty stand-ins (type errors are ignored: what they leave unknown is not a
// type of the module).
type srcLoader struct {
	fset    *token.FileSet
	files   map[string][]*ast.File // import path -> the package's files
	tests   map[string][]*ast.File // import path -> its in-package test files
	xtests  map[string][]*ast.File // import path -> its external test files (package x_test)
	checked map[string]*types.Package
}

func newSrcLoader(sources map[string][]byte) (*srcLoader, error) {
	l := &srcLoader{fset: token.NewFileSet(), files: map[string][]*ast.File{}, tests: map[string][]*ast.File{},
		xtests: map[string][]*ast.File{}, checked: map[string]*types.Package{}}
	names := make([]string, 0, len(sources))
	for name := range sources {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		f, err := parser.ParseFile(l.fset, name, sources[name], parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		imp := module + "/" + path.Dir(name)
		switch {
		case strings.HasSuffix(f.Name.Name, "_test"):
			l.xtests[imp] = append(l.xtests[imp], f)
		case strings.HasSuffix(name, "_test.go"):
			l.tests[imp] = append(l.tests[imp], f)
		default:
			l.files[imp] = append(l.files[imp], f)
		}
	}
	return l, nil
}

// Import implements types.Importer: the module's packages from source, others empty.
func (l *srcLoader) Import(p string) (*types.Package, error) {
	if _, ok := l.files[p]; ok {
		return l.pkg(p), nil
	}
	name := path.Base(p)
	if i := strings.IndexAny(name, ".-"); i > 0 {
		name = name[:i]
	}
	stub := types.NewPackage(p, name)
	stub.MarkComplete()
	return stub, nil
}

// pkg is the package at import path p without its tests, checked once.
func (l *srcLoader) pkg(p string) *types.Package {
	if c, ok := l.checked[p]; ok {
		return c
	}
	l.checked[p] = types.NewPackage(p, path.Base(p)) // an import cycle meets an empty package
	c, _ := l.check(p, l.files[p], nil)
	l.checked[p] = c
	return c
}

func (l *srcLoader) check(p string, files []*ast.File, info *types.Info) (*types.Package, error) {
	conf := types.Config{Importer: l, Error: func(error) {}, FakeImportC: true}
	return conf.Check(p, l.fset, files, info)
}

// variant is one package as the scan sees it: its files, checked with their tests or as
// the external test package, and the types of their expressions.
type variant struct {
	path  string // the import path of the package whose constructors may set the fields
	files []*ast.File
	info  *types.Info
}

// variants are every package of the module checked with its in-package tests, and every
// external test package.
func (l *srcLoader) variants() []variant {
	var out []variant
	paths := make([]string, 0, len(l.files)+len(l.xtests))
	for p := range l.files {
		paths = append(paths, p)
	}
	for p := range l.xtests {
		if _, ok := l.files[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	newInfo := func() *types.Info {
		return &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	}
	for _, p := range paths {
		if files := append(append([]*ast.File(nil), l.files[p]...), l.tests[p]...); len(files) > 0 {
			v := variant{path: p, files: files, info: newInfo()}
			l.check(p, files, v.info)
			out = append(out, v)
		}
		if x := l.xtests[p]; len(x) > 0 {
			v := variant{path: p + "_test", files: x, info: newInfo()}
			l.check(p+"_test", x, v.info)
			out = append(out, v)
		}
	}
	return out
}

// scan finds in v's files the assignments to, and the literals setting, fields (owner ->
// behaviour fields) outside the owner package's New* functions.
func (v variant) scan(fset *token.FileSet, fields map[string]map[string]bool) []string {
	var out []string
	report := func(n ast.Node, owner, field, how string) {
		pos := fset.Position(n.Pos())
		out = append(out, fmt.Sprintf("%s:%d: %s %s.%s outside the constructor of %s: give it to New", pos.Filename, pos.Line, how,
			path.Base(owner), field, strings.TrimPrefix(owner[:strings.LastIndex(owner, ".")], module+"/")))
	}
	for _, f := range v.files {
		for _, decl := range f.Decls {
			fd, _ := decl.(*ast.FuncDecl)
			var inNew func(owner string) bool = func(string) bool { return false }
			if fd != nil && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "New") {
				inNew = func(owner string) bool { return strings.HasPrefix(owner, v.path+".") }
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.AssignStmt:
					if n.Tok != token.ASSIGN {
						return true
					}
					for _, lhs := range n.Lhs {
						sel, ok := lhs.(*ast.SelectorExpr)
						if !ok {
							continue
						}
						if owner := fieldOwner(v.info.Selections[sel]); fields[owner][sel.Sel.Name] && !inNew(owner) {
							report(sel, owner, sel.Sel.Name, "assigns")
						}
					}
				case *ast.CompositeLit:
					owner := typeName(v.info.Types[n].Type)
					for _, e := range n.Elts {
						kv, ok := e.(*ast.KeyValueExpr)
						if !ok {
							continue
						}
						if k, ok := kv.Key.(*ast.Ident); ok && fields[owner][k.Name] && !inNew(owner) {
							report(kv, owner, k.Name, "a literal sets")
						}
					}
				}
				return true
			})
		}
	}
	return out
}

// fieldOwner is "path.Type" of the struct that declares the field sel selects ("" when
// sel is not a field of a named struct).
func fieldOwner(sel *types.Selection) string {
	if sel == nil || sel.Kind() != types.FieldVal {
		return ""
	}
	t, owner := sel.Recv(), ""
	for _, i := range sel.Index() {
		owner = typeName(t)
		named, _ := deref(t).(*types.Named)
		if named == nil {
			return ""
		}
		st, ok := named.Underlying().(*types.Struct)
		if !ok || i >= st.NumFields() {
			return ""
		}
		t = st.Field(i).Type()
	}
	return owner
}

// typeName is "path.Type" of t or of what t points to ("" when unnamed).
func typeName(t types.Type) string {
	if t == nil {
		return ""
	}
	named, _ := deref(t).(*types.Named)
	if named == nil || named.Obj().Pkg() == nil {
		return ""
	}
	return named.Obj().Pkg().Path() + "." + named.Obj().Name()
}

func deref(t types.Type) types.Type {
	if p, ok := t.(*types.Pointer); ok {
		return p.Elem()
	}
	return t
}

// treeSources reads every Go file of the repository at root (module-relative path ->
// source), leaving out testdata.
func treeSources(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWiringThroughConstructors holds the tree to wiring at construction: no function or
// interface field of a constructed type (constructed) is set outside its constructors.
func TestWiringThroughConstructors(t *testing.T) {
	src := treeSources(t, "..")
	if len(src) < 100 {
		t.Fatalf("read %d Go files, want the whole tree", len(src))
	}
	found, err := lateWiring(src, constructed)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Error(f)
	}
}

// TestWiringCheckCatchesLateFields runs the check over small packages: a behaviour field
// of a constructed type (a function, a named function type, an interface, a struct of
// functions) set outside the package's New* functions is caught, by assignment, several
// at once or in a literal, from another package, a method or a test; data fields,
// unexported ones, the constructors and another type's field of the same name are not.
func TestWiringCheckCatchesLateFields(t *testing.T) {
	const images = `package images

import "context"

type Wait func(string) string

type Profiles struct{ Images func() []string }

type Source interface{ List(context.Context) error }

type Service struct {
	More     func(ctx context.Context) []string
	Waiter   Wait
	Src      Source
	Profiles Profiles
	Name     string
	Err      error
	more     func() []string
}

func New(more func(ctx context.Context) []string) *Service {
	s := &Service{More: more, Name: "images"}
	s.Waiter, s.Src = nil, nil
	return s
}

func (s *Service) Reset() { s.more = nil }
`
	const token = `package cluster

type Token struct {
	Addresses []string
	More      func()
}
`
	root := func(body string) string {
		return `package daemon

import (
	"context"

	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/images"
)

type Daemon struct{ images *images.Service }

var _ = context.Background
var _ cluster.Token

func (d *Daemon) wire() {
	d.images = images.New(nil)
	` + body + `
}
`
	}
	for _, c := range []struct {
		name  string
		files map[string]string
		want  []string // what each finding says, in order
	}{
		{"func field from the root", map[string]string{"daemon/daemon.go": root(`d.images.More = func(context.Context) []string { return nil }`)},
			[]string{"daemon/daemon.go:17: assigns images.Service.More outside the constructor of daemon/images"}},
		{"named func type", map[string]string{"daemon/daemon.go": root(`d.images.Waiter = func(string) string { return "" }`)},
			[]string{"assigns images.Service.Waiter"}},
		{"interface", map[string]string{"daemon/daemon.go": root(`d.images.Src = nil`)}, []string{"assigns images.Service.Src"}},
		{"struct of funcs", map[string]string{"daemon/daemon.go": root(`d.images.Profiles = images.Profiles{}`)}, []string{"assigns images.Service.Profiles"}},
		{"several at once", map[string]string{"daemon/daemon.go": root(`s := d.images; s.More, s.Name, s.Src = nil, "x", nil`)},
			[]string{"assigns images.Service.More", "assigns images.Service.Src"}},
		{"a literal", map[string]string{"daemon/daemon.go": root(`d.images = &images.Service{Name: "x", More: nil}`)},
			[]string{"a literal sets images.Service.More"}},
		{"a New of another package", map[string]string{"daemon/daemon.go": root("") + "\nfunc NewDaemon() { s := images.New(nil); s.More = nil }\n"},
			[]string{"daemon/daemon.go:20: assigns images.Service.More"}},
		{"a method of the package", map[string]string{"daemon/images/set.go": "package images\n\nfunc (s *Service) Use(src Source) { s.Src = src }\n"},
			[]string{"daemon/images/set.go:3: assigns images.Service.Src"}},
		{"a test of the package", map[string]string{"daemon/images/images_test.go": "package images\n\nimport \"testing\"\n\nfunc TestX(t *testing.T) { New(nil).More = nil }\n"},
			[]string{"daemon/images/images_test.go:5: assigns images.Service.More"}},
		{"an external test", map[string]string{"daemon/images/x_test.go": "package images_test\n\nimport \"github.com/osdcloud/osd/daemon/images\"\n\nvar _ = &images.Service{Src: nil}\n"},
			[]string{"daemon/images/x_test.go:5: a literal sets images.Service.Src"}},
		{"data and unexported fields", map[string]string{"daemon/daemon.go": root(`d.images.Name, d.images.Err = "x", nil`),
			"daemon/images/set.go": "package images\n\nfunc (s *Service) Set() { s.more = nil; s.Name = \"y\" }\n"}, nil},
		{"another type's field of the same name", map[string]string{"daemon/daemon.go": root(`var tok cluster.Token; tok.More, tok.Addresses = nil, nil; _ = tok`)}, nil},
		{"the constructor alone", nil, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := map[string][]byte{"daemon/images/images.go": []byte(images), "daemon/cluster/token.go": []byte(token)}
			for f, s := range c.files {
				src[f] = []byte(s)
			}
			got, err := lateWiring(src, map[string]string{"daemon/images": "Service"})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("lateWiring() = %q, want %d findings like %q", got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("lateWiring()[%d] = %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}
