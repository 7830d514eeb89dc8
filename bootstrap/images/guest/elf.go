package guest

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// SSHPackages is the SSH server of the guest, Debian's dropbear; the shared libraries its
// binaries need come from the packages it depends on.
var SSHPackages = []string{"dropbear-bin"}

// SSHBinaries are the programs of SSHPackages the guest runs.
var SSHBinaries = []string{"usr/sbin/dropbear", "usr/bin/dropbearkey"}

// ToolPackages are the Debian packages of the tools a test suite runs in the guest that
// busybox lacks, as CirrOS has them: curl (Tempest reads the metadata service with
// it), mkfs.ext4 and blkid (volume checks). Busybox covers ip, ping, nc, wget, ifconfig,
// hostname and mount; sudo is a script (sudoScript).
var ToolPackages = []string{"curl", "e2fsprogs", "util-linux"}

// ToolBinaries are the programs of ToolPackages the guest carries (with the shared
// libraries they load, found by ELFClosure).
var ToolBinaries = []string{"usr/bin/curl", "sbin/mke2fs", "sbin/blkid"}

// toolLinks are symbolic links the tools' packages make (name -> target).
var toolLinks = [][2]string{{"sbin/mkfs.ext4", "mke2fs"}, {"sbin/mkfs.ext3", "mke2fs"}, {"sbin/mkfs.ext2", "mke2fs"}}

// libDirs are where the dynamic loader looks for libraries (Debian's multiarch paths).
var libDirs = []string{"lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu", "lib", "usr/lib"}

// ELFClosure returns bins (paths relative to root) with the dynamic loader and every
// shared library they need, directly or not (DT_NEEDED, looked up in libDirs), read
// from the file tree at root: each at a path where the guest's loader finds it (the
// loader at its PT_INTERP path, libraries under lib/x86_64-linux-gnu by soname).
// Symbolic links inside root are followed within root.
func ELFClosure(root string, bins []string) ([]File, error) {
	var out []File
	seen := map[string]bool{}
	var queue []string
	interp := ""
	for _, b := range bins {
		data, needed, in, err := readELF(root, b)
		if err != nil {
			return nil, err
		}
		out = append(out, File{Path: b, Data: data, Mode: 0o755})
		if in != "" {
			interp = in
		}
		queue = append(queue, needed...)
	}
	if interp != "" {
		rel := strings.TrimPrefix(path.Clean(interp), "/")
		data, err := readInRoot(root, rel)
		if err != nil {
			return nil, fmt.Errorf("dynamic loader %s: %w", interp, err)
		}
		out = append(out, File{Path: rel, Data: data, Mode: 0o755})
		seen[path.Base(rel)] = true
	}
	for len(queue) > 0 {
		lib := queue[0]
		queue = queue[1:]
		if seen[lib] {
			continue
		}
		seen[lib] = true
		found := ""
		for _, d := range libDirs {
			if _, err := resolveInRoot(root, path.Join(d, lib)); err == nil {
				found = path.Join(d, lib)
				break
			}
		}
		if found == "" {
			return nil, fmt.Errorf("shared library %s not found under %s in %s", lib, strings.Join(libDirs, ", "), root)
		}
		data, needed, _, err := readELF(root, found)
		if err != nil {
			return nil, err
		}
		out = append(out, File{Path: path.Join(libDirs[0], lib), Data: data, Mode: 0o644})
		queue = append(queue, needed...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// readELF reads an ELF file in root and returns its content, its DT_NEEDED libraries and
// its PT_INTERP loader (if any).
func readELF(root, rel string) ([]byte, []string, string, error) {
	data, err := readInRoot(root, rel)
	if err != nil {
		return nil, nil, "", err
	}
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", rel, err)
	}
	defer f.Close()
	needed, err := f.ImportedLibraries()
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", rel, err)
	}
	interp := ""
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return nil, nil, "", fmt.Errorf("%s: PT_INTERP: %w", rel, err)
			}
			interp = strings.TrimRight(string(b), "\x00")
		}
	}
	return data, needed, interp, nil
}

func readInRoot(root, rel string) ([]byte, error) {
	p, err := resolveInRoot(root, rel)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(root, p))
}

// resolveInRoot follows the symbolic links of rel (a slash path relative to root), each
// component in turn, as if root were "/", and returns the resolved relative path of an
// existing file.
func resolveInRoot(root, rel string) (string, error) {
	todo := strings.Split(strings.Trim(path.Clean("/"+rel), "/"), "/")
	var done []string
	for hops := 0; len(todo) > 0; {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			if len(done) > 0 {
				done = done[:len(done)-1]
			}
			continue
		}
		cur := path.Join(append(done, c)...)
		st, err := os.Lstat(filepath.Join(root, cur))
		if err != nil {
			return "", err
		}
		if st.Mode()&os.ModeSymlink == 0 {
			done = append(done, c)
			continue
		}
		if hops++; hops > 40 {
			return "", fmt.Errorf("%s: too many symbolic links", rel)
		}
		target, err := os.Readlink(filepath.Join(root, cur))
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(target, "/") {
			done = nil
		}
		todo = append(strings.Split(target, "/"), todo...)
	}
	if len(done) == 0 {
		return "", fmt.Errorf("%s: resolves to the root", rel)
	}
	return path.Join(done...), nil
}
