// Package bundle owns the airgap bundle that moves images between hosts: one tar
// (bundle.json first: the format version, the images and every blob's digest and size;
// then an OCI image layout) of images of an image store (images.Store), written
// compressed with zstd (Export, ExportFile, WriteFile, with CheckExportPath before any
// work) and read back into a store (Import).
//
// A bundle is untrusted input: import accepts only the entries export writes, checks
// every name and digest before it reaches a path (check.go), streams the blobs into one
// staging directory opened as an os.Root (stage.go), hashing them on the way, and checks
// every image against its blobs before the store commits anything
// (images.Store.CommitImport). A bundle that fails any check imports nothing.
package bundle
