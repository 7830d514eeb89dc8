package ctrimport

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	"github.com/osdcloud/osd/bootstrap/images/oci"
)

// BenchmarkImport measures Import (OCI archive stream + unpack into
// overlayfs) into a private containerd of an image holding 200 MB of
// incompressible data in 200 files.
func BenchmarkImport(b *testing.B) {
	sock := startContainerdB(b)
	rng := rand.New(rand.NewSource(1)) // test data, not a secret
	var files []oci.File
	for i := 0; i < 200; i++ {
		data := make([]byte, 1<<20)
		rng.Read(data)
		files = append(files, oci.File{Path: fmt.Sprintf("data/%03d", i), Mode: 0o644, Data: data})
	}
	img, err := oci.ImageFromFiles(files, oci.ImageConfig{})
	if err != nil {
		b.Fatal(err)
	}
	size, _ := img.Manifest()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := Import(context.Background(), sock, img, fmt.Sprintf("localhost/osd/bench:%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(size.Layers[0].Size)/1e6, "layer-MB")
}
