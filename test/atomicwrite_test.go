package test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// atomicHelper is the one package that writes a file through a temporary one renamed into
// place (fsutil.WriteAtomic, WriteFileAtomic, CopyFile, Symlink, RenameDurable).
const atomicHelper = "bootstrap/fsutil/"

// atomicWriteExceptions are the functions (file:function) allowed a copy of atomic writing
// for now, each with the reason; an entry that no longer matches a copy fails the test.
var atomicWriteExceptions = map[string]string{}

// atomicWriteCopies returns the functions of the parsed file f that write a file through a
// temporary name renamed into place themselves, each as "file:line function: why" (pure).
// A function (with the function literals inside it) is a copy when it renames (os.Rename,
// syscall.Rename, unix.Rename, unix.Renameat, unix.Renameat2) and also
//   - makes a temporary file (os.CreateTemp, ioutil.TempFile), or
//   - syncs a file (a method call x.Sync() on a value, unix.Fsync, unix.Fdatasync,
//     syscall.Fsync), or
//   - makes a link to rename (os.Symlink, os.Link, unix.Symlink), or
//   - writes with os.WriteFile or ioutil.WriteFile the very path it then renames.
//
// Moving a directory or a finished file (a rename alone, or one followed by fsutil.SyncDir)
// is not a copy: there is nothing half-written to guard.
func atomicWriteCopies(fset *token.FileSet, file string, f *ast.File) []string {
	pkgs := map[string]string{} // local name -> import path
	for _, is := range f.Imports {
		p, _ := strconv.Unquote(is.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if is.Name != nil {
			name = is.Name.Name
		}
		pkgs[name] = p
	}
	// call names a call as "importpath.Func" when it calls a package's function, and
	// ".Method" when it calls a method of a value.
	call := func(c *ast.CallExpr) string {
		sel, ok := c.Fun.(*ast.SelectorExpr)
		if !ok {
			return ""
		}
		if id, ok := sel.X.(*ast.Ident); ok {
			if p, ok := pkgs[id.Name]; ok {
				return p + "." + sel.Sel.Name
			}
		}
		return "." + sel.Sel.Name
	}
	const unix = "golang.org/x/sys/unix"
	renames := []string{"os.Rename", "syscall.Rename", unix + ".Rename", unix + ".Renameat", unix + ".Renameat2"}
	temps := []string{"os.CreateTemp", "io/ioutil.TempFile"}
	syncs := []string{unix + ".Fsync", unix + ".Fdatasync", "syscall.Fsync"}
	links := []string{"os.Symlink", "os.Link", unix + ".Symlink"}
	writes := []string{"os.WriteFile", "io/ioutil.WriteFile"}
	text := func(e ast.Expr) string {
		var b strings.Builder
		ast.Fprint(&b, token.NewFileSet(), e, ast.NotNilFilter)
		return b.String()
	}

	var out []string
	for _, decl := range f.Decls {
		var rename *ast.CallExpr
		var renamed []string // the source expressions of the renames
		var why []string
		written := map[string]bool{}
		ast.Inspect(decl, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			name := call(c)
			switch {
			case slices.Contains(renames, name):
				if rename == nil {
					rename = c
				}
				src := 0
				if strings.HasSuffix(name, ".Renameat") || strings.HasSuffix(name, ".Renameat2") {
					src = 1 // (olddirfd, oldpath, ...)
				}
				if len(c.Args) > src {
					renamed = append(renamed, text(c.Args[src]))
				}
			case slices.Contains(temps, name):
				why = append(why, "makes a temporary file ("+name+")")
			case name == ".Sync" && len(c.Args) == 0, slices.Contains(syncs, name):
				why = append(why, "syncs a file")
			case slices.Contains(links, name):
				why = append(why, "makes a link ("+name+")")
			case slices.Contains(writes, name) && len(c.Args) > 0:
				written[text(c.Args[0])] = true
			}
			return true
		})
		if rename == nil {
			continue
		}
		for _, r := range renamed {
			if written[r] {
				why = append(why, "writes the file it renames")
			}
		}
		if len(why) == 0 {
			continue
		}
		slices.Sort(why)
		out = append(out, file+":"+declName(decl)+" (line "+strconv.Itoa(fset.Position(rename.Pos()).Line)+
			"): "+strings.Join(slices.Compact(why), ", ")+" and renames it into place")
	}
	return out
}

// declName names a declaration: "Func", "Type.Method", or "var" for the rest.
func declName(d ast.Decl) string {
	fd, ok := d.(*ast.FuncDecl)
	if !ok {
		return "var"
	}
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// TestAtomicWriteOnlyInHelper holds the tree to one atomic-write helper: no function of a
// non-test file outside bootstrap/fsutil (and ./test) writes a file through a temporary one
// renamed into place itself.
func TestAtomicWriteOnlyInHelper(t *testing.T) {
	fset := token.NewFileSet()
	var found []string
	files := 0
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "bin" || rel == "test" || rel+"/" == atomicHelper) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		found = append(found, atomicWriteCopies(fset, rel, f)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files, want the whole tree", files)
	}
	sort.Strings(found)
	used := map[string]bool{}
	for _, c := range found {
		key := c[:strings.Index(c, " (line ")]
		if _, ok := atomicWriteExceptions[key]; ok {
			used[key] = true
			continue
		}
		t.Errorf("%s: write it with %s (WriteAtomic, WriteFileAtomic, CopyFile, Symlink, RenameDurable)", c, atomicHelper)
	}
	for key, why := range atomicWriteExceptions {
		if !used[key] {
			t.Errorf("exception %s (%s) matches no copy any more: remove it from atomicWriteExceptions", key, why)
		}
	}
}

// TestAtomicWriteCopiesCaught feeds the rule each shape the copies had before the helper
// replaced them (and the helper's own), and the shapes of the tree's legitimate renames.
func TestAtomicWriteCopiesCaught(t *testing.T) {
	const head = "package x\n\nimport (\n\t\"io\"\n\t\"io/ioutil\"\n\t\"os\"\n\t\"path/filepath\"\n\t\"sync\"\n\n\t\"golang.org/x/sys/unix\"\n\t\"github.com/osdcloud/osd/bootstrap/fsutil\"\n)\n\nvar _, _, _, _, _, _ = io.Copy, ioutil.ReadAll, filepath.Dir, sync.Mutex{}, unix.Sync, fsutil.SyncDir\n\n"
	for _, c := range []struct {
		name, src string
		copy      bool
	}{
		// The copies (and the helper itself, which lives in bootstrap/fsutil).
		{"fsutil.writeAtomic", `func writeAtomic(path string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil { return err }
	if err := tmp.Sync(); err != nil { return err }
	tmp.Close()
	return os.Rename(tmp.Name(), path)
}`, true},
		{"fsutil.RenameDurable", `func RenameDurable(src, dst string) error {
	f, err := os.Open(src)
	if err != nil { return err }
	err = f.Sync()
	f.Close()
	return os.Rename(src, dst)
}`, true},
		{"store/schema.go copyFile", `func copyFile(src, dst string) error {
	in, _ := os.Open(src)
	defer in.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".tmp*")
	if err != nil { return err }
	defer os.Remove(tmp.Name())
	tmp.Chmod(0o600)
	io.Copy(tmp, in)
	if err := tmp.Sync(); err != nil { tmp.Close(); return err }
	tmp.Close()
	return os.Rename(tmp.Name(), dst)
}`, true},
		{"cmd/osd/service.go copyFile, a method", `type g struct{}
func (*g) copyFile(src, dst string) error {
	tmp, _ := os.CreateTemp(filepath.Dir(dst), "x")
	tmp.Sync()
	return os.Rename(tmp.Name(), dst)
}`, true},
		{"k3s linkTools: a symlink renamed over", `func linkTools(binDir, self string) error {
	for _, t := range []string{"kubectl"} {
		p := binDir + "/" + t
		tmp := p + ".tmp"
		os.Remove(tmp)
		if err := os.Symlink(self, tmp); err != nil { return err }
		if err := os.Rename(tmp, p); err != nil { return err }
	}
	return nil
}`, true},
		{"archive.go writeFileAtomic", `func writeFileAtomic(path string, write func(io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err := write(tmp); err != nil { return err }
	if err := tmp.Chmod(0o644); err != nil { return err }
	if err := tmp.Sync(); err != nil { return err }
	return os.Rename(tmp.Name(), path)
}`, true},
		{"bundle_export.go: Renameat2 without replacing", `func writeFileAtomicMode(path string) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "x")
	tmp.Sync()
	return unix.Renameat2(unix.AT_FDCWD, tmp.Name(), unix.AT_FDCWD, path, unix.RENAME_NOREPLACE)
}`, true},
		{"apt.go memo: a temporary file, no sync, in a branch", `func memo(m string, b []byte) {
	if os.MkdirAll(filepath.Dir(m), 0o755) == nil {
		if f, err := os.CreateTemp(filepath.Dir(m), ".memo-*"); err == nil {
			f.Write(b)
			if f.Close() == nil { _ = os.Rename(f.Name(), m) }
		}
	}
}`, true},
		{"netsetup/host.go: WriteFile of the renamed path", `func (h Host) save(b []byte) error {
	tmp := h.path() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil { return err }
	return os.Rename(tmp, h.path())
}`, true},
		{"ioutil, the old spelling", `func save(p string, b []byte) error {
	f, _ := ioutil.TempFile(filepath.Dir(p), "x")
	f.Write(b)
	return os.Rename(f.Name(), p)
}`, true},
		{"temporary file in a closure", `func save(p string) error {
	mk := func() string { f, _ := os.CreateTemp("", "x"); return f.Name() }
	return os.Rename(mk(), p)
}`, true},
		{"fsync by descriptor", `func save(fd int, tmp, p string) error {
	unix.Fsync(fd)
	return unix.Rename(tmp, p)
}`, true},
		{"in a package-level function literal", `var save = func(p string) error {
	f, _ := os.CreateTemp("", "x")
	return os.Rename(f.Name(), p)
}`, true},

		// What the tree renames legitimately.
		{"guest/build.go: a directory moved into place", `func build(out, dir string, b []byte) error {
	f, _ := os.Create(filepath.Join(out, "initrd.img"))
	f.Close()
	os.WriteFile(filepath.Join(out, "manifest.json"), b, 0o644)
	return os.Rename(out, dir)
}`, false},
		{"tree.go swapTree: rename, then a file written", `func swapTree(fresh, tree, dir string) error {
	if err := os.Rename(fresh, tree); err != nil { return err }
	return os.WriteFile(filepath.Join(dir, "digest"), nil, 0o644)
}`, false},
		{"bundle_import.go: staged files moved, then the directory synced", `func move(from, to, dst string) error {
	if err := os.Rename(from, to); err != nil { return err }
	return fsutil.SyncDir(dst)
}`, false},
		{"verify.go writeBlob: the helper renames", `func writeBlob(dir, dst string) error {
	tmp, _ := os.CreateTemp(dir, "x")
	tmp.Close()
	return fsutil.RenameDurable(tmp.Name(), dst)
}`, false},
		{"fetch.go: a sync, no rename", `func download(f *os.File) error { return f.Sync() }`, false},
		{"verify.go: a damaged file moved aside", `func aside(p string) error { return os.Rename(p, p+".corrupt") }`, false},
		{"sync of every file system is not a file's", `func flush(a, b string) error {
	unix.Sync()
	return os.Rename(a, b)
}`, false},
		{"copy and rename in different functions", `func write(p string) { f, _ := os.CreateTemp("", "x"); f.Sync() }
func move(a, b string) error { return os.Rename(a, b) }`, false},
		{"the helper's own calls", `func save(p string, b []byte) error { return fsutil.WriteFileAtomic(p, b, 0o600) }`, false},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "x.go", head+c.src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := atomicWriteCopies(fset, "x.go", f)
		if c.copy && len(got) == 0 {
			t.Errorf("%s: not caught, want it reported as a copy of atomic writing", c.name)
		}
		if !c.copy && len(got) != 0 {
			t.Errorf("%s: reported %v, want it allowed", c.name, got)
		}
	}
}
