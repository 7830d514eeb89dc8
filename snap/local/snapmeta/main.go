// Command snapmeta writes a snap's meta/snap.yaml from its snapcraft.yaml, as snapcraft
// would for what osd's snap uses: it keeps the snap's metadata, environment and apps,
// sets the version, turns the build-on architectures into the snap's list, and drops what
// only snapcraft reads (parts, adopt-info).
//
//	go run ./snap/local/snapmeta -version V snap/snapcraft.yaml > prime/meta/snap.yaml
package main

import (
	"flag"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

func main() {
	version := flag.String("version", "", "the snap's version")
	flag.Parse()
	if flag.NArg() != 1 || *version == "" {
		fmt.Fprintln(os.Stderr, "usage: snapmeta -version VERSION snapcraft.yaml")
		os.Exit(2)
	}
	in, err := os.ReadFile(flag.Arg(0))
	if err == nil {
		var out []byte
		out, err = snapYAML(in, *version)
		if err == nil {
			_, err = os.Stdout.Write(out)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "snapmeta:", err)
		os.Exit(1)
	}
}

// snapcraftOnly are the top-level keys snapcraft reads and snapd does not.
var snapcraftOnly = []string{"parts", "adopt-info", "build-base", "build-packages", "build-snaps", "package-repositories"}

// snapYAML is meta/snap.yaml for snapcraft.yaml src at version.
func snapYAML(src []byte, version string) ([]byte, error) {
	var m map[string]any
	if err := yaml.UnmarshalStrict(src, &m); err != nil {
		return nil, fmt.Errorf("read snapcraft.yaml: %w", err)
	}
	for _, k := range []string{"name", "summary", "confinement", "apps"} {
		if m[k] == nil {
			return nil, fmt.Errorf("snapcraft.yaml has no %s", k)
		}
	}
	for _, k := range snapcraftOnly {
		delete(m, k)
	}
	m["version"] = version
	if archs, ok := m["architectures"]; ok {
		list, err := architectures(archs)
		if err != nil {
			return nil, err
		}
		m["architectures"] = list
	}
	return yaml.Marshal(m)
}

// architectures turns snapcraft's [{build-on: X, build-for: Y}] (or a list of names) into
// the names the snap runs on.
func architectures(v any) ([]string, error) {
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("architectures: want a list, got %T", v)
	}
	var out []string
	for _, it := range items {
		switch a := it.(type) {
		case string:
			out = append(out, a)
		case map[string]any:
			target := a["build-for"]
			if target == nil {
				target = a["build-on"]
			}
			switch t := target.(type) {
			case string:
				out = append(out, t)
			case []any:
				for _, s := range t {
					if name, ok := s.(string); ok {
						out = append(out, name)
					}
				}
			default:
				return nil, fmt.Errorf("architectures: entry %v names no build-on or build-for", a)
			}
		default:
			return nil, fmt.Errorf("architectures: unexpected entry %v", it)
		}
	}
	return out, nil
}
