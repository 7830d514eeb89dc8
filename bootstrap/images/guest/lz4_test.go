package guest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand"
	"os/exec"
	"testing"

	"github.com/pierrec/lz4"
)

// unLZ4 decompresses LZ4's legacy format as the kernel's unlz4 does: the magic, then
// (size, block) pairs, each block at most 8 MiB decompressed.
func unLZ4(b []byte) ([]byte, error) {
	if len(b) < 4 || binary.LittleEndian.Uint32(b) != lz4LegacyMagic {
		return nil, fmt.Errorf("not LZ4 legacy format")
	}
	var out []byte
	block := make([]byte, lz4LegacyBlock)
	for b = b[4:]; len(b) > 0; {
		if len(b) < 4 {
			return nil, fmt.Errorf("truncated block size")
		}
		n := int(binary.LittleEndian.Uint32(b))
		if n > len(b)-4 {
			return nil, fmt.Errorf("block of %d bytes, %d left", n, len(b)-4)
		}
		k, err := lz4.UncompressBlock(b[4:4+n], block)
		if err != nil {
			return nil, err
		}
		out, b = append(out, block[:k]...), b[4+n:]
	}
	return out, nil
}

// TestLZ4Writer compresses inputs around the 8 MiB block size and reads them back as the
// kernel's unlz4 does (unLZ4).
func TestLZ4Writer(t *testing.T) {
	rnd := rand.New(rand.NewSource(1))
	random := make([]byte, 1<<20)
	rnd.Read(random)
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"small", []byte("osd-guest: init started\n")},
		{"one block exactly", bytes.Repeat([]byte("cpio newc "), lz4LegacyBlock/10+1)[:lz4LegacyBlock]},
		{"over a block", append(bytes.Repeat([]byte{0}, lz4LegacyBlock), random...)},
		{"incompressible", random},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			z := newLZ4Writer(&out)
			// Written in uneven pieces, as the cpio writer does.
			for p := tc.in; len(p) > 0; {
				k := min(len(p), 100_003)
				if _, err := z.Write(p[:k]); err != nil {
					t.Fatal(err)
				}
				p = p[k:]
			}
			if err := z.Close(); err != nil {
				t.Fatal(err)
			}
			if got := binary.LittleEndian.Uint32(out.Bytes()); got != lz4LegacyMagic {
				t.Fatalf("magic %#x, want %#x", got, lz4LegacyMagic)
			}
			back, err := unLZ4(out.Bytes())
			if err != nil || !bytes.Equal(back, tc.in) {
				t.Errorf("read back %d bytes, %v; want the %d bytes written", len(back), err, len(tc.in))
			}
			// And as lz4's own decompressor reads it, where installed.
			if _, err := exec.LookPath("lz4"); err == nil {
				cmd := exec.Command("lz4", "-dc")
				cmd.Stdin = bytes.NewReader(out.Bytes())
				back, err := cmd.Output()
				if err != nil || !bytes.Equal(back, tc.in) {
					t.Errorf("lz4 -dc: %d bytes, %v; want the %d bytes written", len(back), err, len(tc.in))
				}
			}
		})
	}
}
