package preflight

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// dpkgInstalled reads dpkg's status database and reports, for each wanted
// package, whether it is installed ("<want> ok installed"). Names may carry
// an architecture qualifier (libc6:amd64).
func dpkgInstalled(statusPath string, want []string) (map[string]bool, error) {
	got := make(map[string]bool, len(want))
	wanted := make(map[string]bool, len(want))
	for _, p := range want {
		got[p] = false
		wanted[p] = true
	}
	if len(want) == 0 {
		return got, nil
	}
	file, err := os.Open(statusPath)
	if err != nil {
		return got, fmt.Errorf("read dpkg status: %w", err)
	}
	defer file.Close()
	var name, arch, status string
	flush := func() {
		if name != "" && strings.HasSuffix(status, " installed") {
			for _, key := range []string{name, name + ":" + arch} {
				if wanted[key] {
					got[key] = true
				}
			}
		}
		name, arch, status = "", "", ""
	}
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			flush()
			continue
		}
		key, value, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(line, " ") {
			continue
		}
		value = strings.TrimSpace(value)
		switch key {
		case "Package":
			name = value
		case "Architecture":
			arch = value
		case "Status":
			status = value
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		return got, fmt.Errorf("read dpkg status: %w", err)
	}
	return got, nil
}
