package oci

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// epoch is Epoch as a config and history time.
var epoch = v1.Time{Time: Epoch}

// BlobLayer is an uncompressed layer whose digest was computed in the single
// pass that wrote it. Its bytes live in memory or in a file. Layers stay
// uncompressed on the local path (store, containerd): compressing a gigabyte
// of files costs more time than the bytes cost on the same disk; only an
// airgap bundle is compressed (package bundle).
type BlobLayer struct {
	digest, diffID v1.Hash
	size           int64
	data           []byte // in-memory layers
	path           string // file-backed layers
}

var _ v1.Layer = (*BlobLayer)(nil)

func (l *BlobLayer) Digest() (v1.Hash, error) { return l.digest, nil }
func (l *BlobLayer) DiffID() (v1.Hash, error) { return l.diffID, nil }
func (l *BlobLayer) Size() (int64, error)     { return l.size, nil }
func (l *BlobLayer) MediaType() (types.MediaType, error) {
	return types.DockerUncompressedLayer, nil
}

func (l *BlobLayer) Compressed() (io.ReadCloser, error) {
	if l.path == "" {
		return io.NopCloser(bytes.NewReader(l.data)), nil
	}
	return os.Open(l.path)
}

func (l *BlobLayer) Uncompressed() (io.ReadCloser, error) { return l.Compressed() }

// File is the file that holds a file-backed layer's bytes ("" for a layer in memory).
func (l *BlobLayer) File() string { return l.path }

// MovedTo records that the layer's file was renamed to path (the image store adopts
// it as a blob instead of copying it).
func (l *BlobLayer) MovedTo(path string) { l.path = path }

// countingHash hashes and counts what is written through it.
type countingHash struct {
	h hash.Hash
	n int64
}

func (c *countingHash) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

func (c *countingHash) hash() v1.Hash {
	return v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(c.h.Sum(nil))}
}

// writeLayer runs produce over a tar writer that streams to w, returning the
// layer's digest (the same as its diff ID: the layer is not compressed) and
// size.
func writeLayer(w io.Writer, produce func(*tar.Writer) error) (digest, diffID v1.Hash, size int64, err error) {
	sum := &countingHash{h: sha256.New()}
	bw := bufio.NewWriterSize(io.MultiWriter(w, sum), 1<<20)
	tw := tar.NewWriter(bw)
	if err := produce(tw); err != nil {
		return digest, diffID, 0, err
	}
	if err := tw.Close(); err != nil {
		return digest, diffID, 0, fmt.Errorf("finish layer tar: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return digest, diffID, 0, fmt.Errorf("write layer: %w", err)
	}
	return sum.hash(), sum.hash(), sum.n, nil
}

// memLayer builds an in-memory layer (for small images).
func memLayer(produce func(*tar.Writer) error) (*BlobLayer, error) {
	var buf bytes.Buffer
	d, diff, n, err := writeLayer(&buf, produce)
	if err != nil {
		return nil, err
	}
	return &BlobLayer{digest: d, diffID: diff, size: n, data: buf.Bytes()}, nil
}

// fileLayer builds a layer written to path (for root filesystems).
func fileLayer(path string, produce func(*tar.Writer) error) (l *BlobLayer, err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("create layer file: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("write layer file: %w", cerr)
		}
		if err != nil {
			os.Remove(path)
		}
	}()
	d, diff, n, err := writeLayer(f, produce)
	if err != nil {
		return nil, err
	}
	return &BlobLayer{digest: d, diffID: diff, size: n, path: path}, nil
}
