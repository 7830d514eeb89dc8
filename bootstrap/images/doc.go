// Package images owns every container image osd runs: the image recipes
// (Debian packages, fixed service users, debconf answers, files,
// entrypoint), the mmdebstrap driver that builds a root filesystem from the
// host's Debian mirror, the build cache keyed by recipe and resolved package
// versions (the image store, which members fetch from), the archives the
// embedded k3s imports at start, and the airgap bundle that moves images
// between hosts. The layers and archives themselves are packed in process by
// package oci.
//
// It also generates the pause image k3s needs from a hand-assembled static
// x86-64 executable (package asm), so no toolchain or registry is needed.
//
// Wiring, in short:
//
//	b := &images.Builder{StateDir: dir, Progress: fn}
//	b.BuildAll(ctx)                          // osd images build [NAME...]
//	b.List()                                 // osd images list
//	store, _ := b.Store()
//	file, err := images.CheckExportPath(file, force, store.Dir()) // before any work
//	images.WriteBundleFile(file, force, store) // osd images export [--force] FILE
//	b.Import(file)                           // osd images import FILE
//	b.WriteContainerdArchive(k3sDataDir+"/agent/images/osd.tar") // before k3s starts
//
// A bundle is untrusted input: import accepts only the entries export writes,
// checks every name and digest before it reaches a path, and stages blobs in
// one directory opened as an os.Root (bundle_check.go, bundle_import.go).
//
// The pause image alone (needed before anything is built):
//
//	pause, _ := images.PauseImage()
//	oci.WriteArchiveFile(path, map[string]v1.Image{images.PauseRef: pause})
//
// Package ctrimport loads images into a running containerd instead.
package images
