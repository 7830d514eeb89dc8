package helmclient

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/yaml"
)

// LoadChart loads chart directory name from fsys. Dependencies whose repository is
// "file://../<dir>" (the library chart) are loaded from <dir> in the same fsys as if they
// were vendored under charts/. It also returns a digest of every file it loaded, so a
// changed template (a new osd binary) can be told apart from an unchanged one.
func LoadChart(fsys fs.FS, name string) (*chart.Chart, string, error) {
	files, err := readDir(fsys, name, "")
	if err != nil {
		return nil, "", fmt.Errorf("load chart %s: %w", name, err)
	}
	var meta struct {
		Dependencies []struct {
			Name       string `json:"name"`
			Repository string `json:"repository"`
		} `json:"dependencies"`
	}
	for _, f := range files {
		if f.Name == "Chart.yaml" {
			if err := yaml.Unmarshal(f.Data, &meta); err != nil {
				return nil, "", fmt.Errorf("load chart %s: Chart.yaml: %w", name, err)
			}
		}
	}
	for _, d := range meta.Dependencies {
		dir, ok := strings.CutPrefix(d.Repository, "file://../")
		if !ok {
			return nil, "", fmt.Errorf("load chart %s: dependency %s: only file://../ repositories are supported", name, d.Name)
		}
		dep, err := readDir(fsys, dir, "charts/"+d.Name+"/")
		if err != nil {
			return nil, "", fmt.Errorf("load chart %s: dependency %s: %w", name, d.Name, err)
		}
		files = append(files, dep...)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	h := sha256.New()
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%d\x00", f.Name, len(f.Data))
		h.Write(f.Data)
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		return nil, "", fmt.Errorf("load chart %s: %w", name, err)
	}
	return ch, hex.EncodeToString(h.Sum(nil)), nil
}

func readDir(fsys fs.FS, dir, prefix string) ([]*loader.BufferedFile, error) {
	var files []*loader.BufferedFile
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, dir+"/")
		files = append(files, &loader.BufferedFile{Name: prefix + path.Clean(rel), Data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no files", dir)
	}
	return files, nil
}
