package images

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// Python byte-compilation of a layered image's packages is deferred and run in
// parallel. Every Python package's postinst runs `py3compile -p PACKAGE [DIR]`, one
// interpreter compiling one package's files after another: most of the "Setting up"
// time of the OpenStack layers, on one core. During the installation a stand-in
// py3compile, first in the PATH of apt-get and so of the maintainer scripts, records
// each call; after it, the recorded calls run with the real py3compile, as many at
// once as the host has cores. The files compiled are the same: each call is the one
// the package asked for, with the same arguments.

// pyCompileDir is the directory, inside the build's root (under run/, which no layer
// holds), of the stand-in and its record.
const pyCompileDir = "run/osd-build"

// pyCompileShim is the stand-in py3compile: it appends its arguments, each ended by
// the unit separator (0x1f), as one line of the record.
const pyCompileShim = `#!/bin/sh
# osd image build: py3compile is run after the installation, in parallel.
for a in "$@"; do printf '%s\037' "$a"; done >>/` + pyCompileDir + `/py3compile.calls
printf '\n' >>/` + pyCompileDir + `/py3compile.calls
`

// parsePyCompileCalls reads the stand-in's record into argument lists, in call order,
// without repeats (a package configured twice compiles once) (pure).
func parsePyCompileCalls(data string) ([][]string, error) {
	var out [][]string
	seen := map[string]bool{}
	for _, line := range strings.Split(data, "\n") {
		if line == "" {
			continue
		}
		if !strings.HasSuffix(line, "\x1f") {
			return nil, fmt.Errorf("py3compile record: incomplete call %q", line)
		}
		if seen[line] {
			continue
		}
		seen[line] = true
		out = append(out, strings.Split(strings.TrimSuffix(line, "\x1f"), "\x1f"))
	}
	return out, nil
}

// installPyCompileShim writes the stand-in into root and returns the PATH directory
// that holds it (as seen inside the chroot).
func installPyCompileShim(root string) (string, error) {
	bin := filepath.Join(root, pyCompileDir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(bin, "py3compile"), []byte(pyCompileShim), 0o755); err != nil {
		return "", err
	}
	return "/" + pyCompileDir + "/bin", nil
}

// runPyCompile runs the recorded py3compile calls in a chroot of root, up to the
// number of cores at once; it returns how many calls ran. No record (no Python
// package installed) is nothing to do.
func runPyCompile(ctx context.Context, root string, env []string) (int, error) {
	data, err := os.ReadFile(filepath.Join(root, pyCompileDir, "py3compile.calls"))
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	calls, err := parsePyCompileCalls(string(data))
	if err != nil {
		return 0, err
	}
	n := runtime.NumCPU()
	jobs := make(chan []string)
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for args := range jobs {
				cmd := exec.CommandContext(ctx, "chroot", append([]string{root, "/usr/bin/py3compile"}, args...)...)
				cmd.Env = env
				if out, err := cmd.CombinedOutput(); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("py3compile %s: %w: %s", strings.Join(args, " "), err, lastLines(string(out), 5))
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, c := range calls {
		jobs <- c
	}
	close(jobs)
	wg.Wait()
	return len(calls), firstErr
}
