package guest

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/pierrec/lz4"
)

// The kernel unpacks an initramfs compressed in LZ4's legacy format (CONFIG_RD_LZ4): the
// magic number, then blocks of at most 8 MiB of input, each its compressed size (32-bit
// little-endian) and its LZ4 block.
const (
	lz4LegacyMagic = 0x184C2102
	lz4LegacyBlock = 8 << 20
)

// lz4Writer compresses what is written to it into LZ4's legacy format; Close writes the
// last block (it does not close the underlying writer).
type lz4Writer struct {
	w   io.Writer
	buf []byte
	out []byte
	hdr bool
}

func newLZ4Writer(w io.Writer) *lz4Writer {
	return &lz4Writer{w: w, buf: make([]byte, 0, lz4LegacyBlock)}
}

func (z *lz4Writer) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), lz4LegacyBlock-len(z.buf))
		z.buf = append(z.buf, p[:k]...)
		p, n = p[k:], n+k
		if len(z.buf) == lz4LegacyBlock {
			if err := z.flush(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// flush writes the buffered input as one block (the header first, once).
func (z *lz4Writer) flush() error {
	if !z.hdr {
		z.hdr = true
		if err := binary.Write(z.w, binary.LittleEndian, uint32(lz4LegacyMagic)); err != nil {
			return err
		}
	}
	if len(z.buf) == 0 {
		return nil
	}
	if need := lz4.CompressBlockBound(len(z.buf)); cap(z.out) < need {
		z.out = make([]byte, need)
	}
	// A destination of CompressBlockBound bytes: the block is always compressed (the
	// legacy format has no stored blocks), incompressible input only grows a little.
	n, err := lz4.CompressBlockHC(z.buf, z.out[:cap(z.out)], 0)
	if err != nil {
		return fmt.Errorf("lz4: %w", err)
	}
	if n == 0 {
		return fmt.Errorf("lz4: block of %d bytes not compressed", len(z.buf))
	}
	if err := binary.Write(z.w, binary.LittleEndian, uint32(n)); err != nil {
		return err
	}
	if _, err := z.w.Write(z.out[:n]); err != nil {
		return err
	}
	z.buf = z.buf[:0]
	return nil
}

// Close writes what is buffered.
func (z *lz4Writer) Close() error { return z.flush() }
