package images_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/bootstrap/images/bundle"
)

// BenchmarkBuildMinimal measures the minimal real image (memcached on
// minbase): cold (empty state: lists, .debs, store), debs-cached (empty
// store, .deb cache and lists kept) and cached (unchanged recipe). Run with
// -benchtime=1x; each cold iteration downloads ~40 MB from the mirror.
func BenchmarkBuildMinimal(b *testing.B) {
	images.RequireBuildTools(b)
	r := images.MinimalRecipe(b)
	ctx := context.Background()
	build := func(b *testing.B, state string) images.Result {
		res, err := (&images.Builder{StateDir: state}).Build(ctx, r)
		if err != nil {
			b.Fatalf("Build(%s) = %v", r.Name, err)
		}
		return res
	}
	b.Run("cold", func(b *testing.B) {
		var size int64
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			state := b.TempDir()
			b.StartTimer()
			size = build(b, state).Size
		}
		b.ReportMetric(float64(size)/1e6, "image-MB")
	})
	state := b.TempDir()
	first := build(b, state)
	b.Run("debs-cached", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			os.RemoveAll(filepath.Join(state, "images"))
			b.StartTimer()
			if res := build(b, state); res.Cached || res.Digest == "" {
				b.Fatalf("Build() = %+v, want a fresh build", res)
			}
		}
		b.ReportMetric(float64(first.Size)/1e6, "image-MB")
	})
	b.Run("cached", func(b *testing.B) {
		build(b, state)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if res := build(b, state); !res.Cached {
				b.Fatalf("Build() Cached = false, want true")
			}
		}
	})
	b.Run("bundle", func(b *testing.B) {
		if _, err := (&images.Builder{StateDir: state}).Build(ctx, images.Recipe{Name: "pause", Ref: images.PauseRef, Kind: images.KindPause}); err != nil {
			b.Fatal(err)
		}
		store, err := images.OpenStore(filepath.Join(state, "images"))
		if err != nil {
			b.Fatal(err)
		}
		var exportT, importT time.Duration
		var size int64
		for i := 0; i < b.N; i++ {
			path := filepath.Join(b.TempDir(), "bundle")
			t0 := time.Now()
			if _, err := bundle.ExportFile(path, store); err != nil {
				b.Fatal(err)
			}
			exportT += time.Since(t0)
			st, _ := os.Stat(path)
			size = st.Size()
			dst, err := images.OpenStore(filepath.Join(b.TempDir(), "fresh"))
			if err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if _, err := bundle.Import(path, dst); err != nil {
				b.Fatal(err)
			}
			importT += time.Since(t1)
		}
		b.ReportMetric(float64(size)/1e6, "bundle-MB")
		b.ReportMetric(exportT.Seconds()/float64(b.N), "export-s")
		b.ReportMetric(importT.Seconds()/float64(b.N), "import-s")
	})
}

func BenchmarkPauseImage(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := images.PauseImage(); err != nil {
			b.Fatal(err)
		}
	}
}
