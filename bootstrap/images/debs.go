package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The .debs every image build downloads are kept in one cache shared by the release's
// images (cache/debs of the release's directory, ReleaseDir), so a package several images hold is downloaded once. Each build gets a
// private directory of hard links to the .debs it installs (apt in a build never
// writes into a directory another build reads), and BuildAll downloads the .debs of
// every image it is about to build ahead, in build order, while the first builds run.

func (b *Builder) debCache() string { return filepath.Join(b.releaseDir(), "cache", "debs") }

// debGlob is the shared cache's file pattern of one package version (any
// architecture: amd64 or all).
func debGlob(dir, name, version string) string {
	return filepath.Join(dir, name+"_"+strings.ReplaceAll(version, ":", "%3a")+"_*.deb")
}

// missingDebs lists name=version of the packages of vers the shared cache lacks.
func missingDebs(dir string, vers map[string]string) []string {
	var out []string
	for name, v := range vers {
		if m, _ := filepath.Glob(debGlob(dir, name, v)); len(m) == 0 {
			out = append(out, name+"="+v)
		}
	}
	sort.Strings(out)
	return out
}

// download fetches into the shared cache the packages of vers it lacks.
func (b *Builder) download(ctx context.Context, suite string, vers map[string]string) error {
	dir := b.debCache()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b.downloadMu.Lock()
	defer b.downloadMu.Unlock()
	b.migrateDebs()
	missing := missingDebs(dir, vers)
	if len(missing) == 0 {
		return nil
	}
	apt, err := b.aptDir(suite)
	if err != nil {
		return err
	}
	// The lists are read as they are (the versions were resolved from them).
	b.listsMu.RLock()
	defer b.listsMu.RUnlock()
	conf, err := apt.prepare()
	if err != nil {
		return err
	}
	if _, err := apt.aptGet(ctx, conf, dir, append([]string{"download"}, missing...)...); err != nil {
		return fmt.Errorf("download packages: %w", err)
	}
	return nil
}

// prefetch downloads, in order, the .debs of every image to build, in the background;
// a build waits for its own (fetchDebs).
func (s *session) prefetch(ctx context.Context, order []planned) {
	var todo []planned
	s.mu.Lock()
	for _, p := range order {
		if p.cached || p.r.Kind != KindDebian {
			continue
		}
		s.fetched[p.r.Name] = &flight{done: make(chan struct{})}
		todo = append(todo, p)
	}
	s.mu.Unlock()
	go func() {
		for _, p := range todo {
			f := s.fetched[p.r.Name]
			f.err = s.b.download(ctx, p.r.Suite, p.vers)
			close(f.done)
		}
	}()
}

// fetchDebs makes sure the shared cache holds r's packages (waiting for the session's
// prefetch, or downloading them) and links them into work/debs for the build.
func (b *Builder) fetchDebs(ctx context.Context, sess *session, r Recipe, vers map[string]string, work string) (string, error) {
	b.emit(Event{Image: r.Name, Step: "download", Total: len(vers), Message: "downloading packages"})
	sess.mu.Lock()
	f, ok := sess.fetched[r.Name]
	sess.mu.Unlock()
	var err error
	if ok {
		select {
		case <-f.done:
			err = f.err
		case <-ctx.Done():
			err = ctx.Err()
		}
	} else {
		err = b.download(ctx, r.Suite, vers)
	}
	if err != nil {
		return "", err
	}
	dir := filepath.Join(work, "debs")
	if err := os.MkdirAll(filepath.Join(dir, "partial"), 0o755); err != nil { // apt wants partial/
		return "", err
	}
	for name, v := range vers {
		m, _ := filepath.Glob(debGlob(b.debCache(), name, v))
		for _, p := range m {
			if err := os.Link(p, filepath.Join(dir, filepath.Base(p))); err != nil && !os.IsExist(err) {
				return "", fmt.Errorf("link %s into the build: %w", filepath.Base(p), err)
			}
		}
	}
	return dir, nil
}

// linkNewDebs keeps in the shared cache what a build downloaded itself.
func (b *Builder) linkNewDebs(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".deb") {
			_ = os.Link(filepath.Join(dir, e.Name()), filepath.Join(b.debCache(), e.Name())) // exists: fine
		}
	}
}

// migrateDebs moves the .debs of the per-image caches of earlier versions into the
// shared cache (once; nothing is downloaded again).
func (b *Builder) migrateDebs() {
	dir := b.debCache()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		files, _ := os.ReadDir(sub)
		for _, f := range files {
			if strings.HasSuffix(f.Name(), ".deb") {
				if _, err := os.Stat(filepath.Join(dir, f.Name())); err != nil {
					_ = os.Rename(filepath.Join(sub, f.Name()), filepath.Join(dir, f.Name()))
				}
			}
		}
		_ = os.RemoveAll(sub)
	}
}

// staleDebs lists the .debs in files of packages the plan holds at another version
// (pure): the cache keeps one version of each package the images use.
func staleDebs(files []string, want map[string]string) []string {
	var out []string
	for _, f := range files {
		if !strings.HasSuffix(f, ".deb") {
			continue
		}
		parts := strings.Split(strings.TrimSuffix(f, ".deb"), "_")
		if len(parts) != 3 {
			continue
		}
		v, ok := want[parts[0]]
		if ok && strings.ReplaceAll(v, ":", "%3a") != parts[1] {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// pruneDebs removes the cached .debs of packages the plan now holds at another version.
func (b *Builder) pruneDebs(plan []planned) {
	want := map[string]string{}
	for _, p := range plan {
		for n, v := range p.vers {
			want[n] = v
		}
	}
	ents, _ := os.ReadDir(b.debCache())
	var files []string
	for _, e := range ents {
		files = append(files, e.Name())
	}
	for _, f := range staleDebs(files, want) {
		_ = os.Remove(filepath.Join(b.debCache(), f))
	}
}
