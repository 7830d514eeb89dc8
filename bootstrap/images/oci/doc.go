// Package oci owns the OCI side of osd's images, in process and without a Docker
// engine (go-containerregistry): layers packed from files (ImageFromFiles), from a
// root filesystem (LayerFromDir, with overlayfs whiteouts) or from the difference of
// two trees (DiffLayer), images stacked from layers, layers extracted into trees
// (ExtractLayer, UnpackImage), and the archives containerd imports: docker-save
// (WriteArchive) and OCI image layout tarballs (WriteOCIArchive, WriteLayout).
//
// Everything it makes is deterministic: entries sorted, time stamps the epoch (or a
// package's own, LayerFromDir's KeepMtimesBefore), so the same content gives the same
// digest. Layers stay uncompressed (BlobLayer); a file-backed layer is adopted by the
// image store without a copy.
package oci
