// Package images owns every container image osd runs: the image recipes
// (Debian packages, fixed service users, debconf answers, files,
// entrypoint) and their catalog, the mmdebstrap driver that builds a root
// filesystem from the host's Debian mirror, the build (its schedule, the
// layers built on kept trees, the .deb cache), and the image store keyed by
// recipe and resolved package versions, which members fetch from and the
// embedded k3s imports from at start.
//
// What it builds on lives in its subpackages: oci packs layers and writes the
// archives containerd imports (in process, no Docker engine); asm holds the
// hand-assembled static executables (the pause image's, so no toolchain or
// registry is needed for it); bundle moves images between hosts as an airgap
// bundle; ctrimport loads images into a running containerd; guest builds the
// guest test image.
//
// Wiring, in short:
//
//	b := &images.Builder{StateDir: dir, Progress: fn}
//	b.BuildAll(ctx)                          // osd images build [NAME...]
//	b.List()                                 // osd images list
//	store, _ := b.Store()
//	file, err := bundle.CheckExportPath(file, force, store.Dir()) // before any work
//	bundle.WriteFile(file, force, store)     // osd images export [--force] FILE
//	bundle.Import(file, store)               // osd images import FILE
//	b.WriteContainerdArchive(k3sDataDir+"/agent/images/osd.tar") // before k3s starts
//
// The pause image alone (needed before anything is built):
//
//	pause, _ := images.PauseImage()
//	oci.WriteArchiveFile(path, map[string]v1.Image{images.PauseRef: pause})
package images
