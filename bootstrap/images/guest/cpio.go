package guest

import (
	"bufio"
	"fmt"
	"io"
)

// cpioEntry is one member of a "newc" (SVR4, no CRC) cpio archive, the format
// the kernel unpacks as an initramfs.
type cpioEntry struct {
	Name      string
	Mode      uint32 // file type bits | permissions
	RdevMajor uint32
	RdevMinor uint32
	Gid       uint32 // group (the owner is root)
	Data      []byte // file content or symlink target
}

const (
	cpioDir     = 0o040000
	cpioReg     = 0o100000
	cpioSymlink = 0o120000
	cpioChar    = 0o020000
)

// writeCPIO writes entries (owned by root and their group, mtime 0, so the archive depends
// only on its content) as a newc archive followed by the trailer.
func writeCPIO(w io.Writer, entries []cpioEntry) error {
	bw := bufio.NewWriter(w)
	var off int64
	put := func(b []byte) error {
		n, err := bw.Write(b)
		off += int64(n)
		return err
	}
	pad := func() error {
		if r := off % 4; r != 0 {
			return put(make([]byte, 4-r))
		}
		return nil
	}
	write := func(ino uint32, e cpioEntry) error {
		nlink := uint32(1)
		if e.Mode&0o170000 == cpioDir {
			nlink = 2
		}
		hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
			ino, e.Mode, 0, e.Gid, nlink, 0, len(e.Data), 0, 0, e.RdevMajor, e.RdevMinor, len(e.Name)+1, 0)
		if err := put([]byte(hdr + e.Name + "\x00")); err != nil {
			return err
		}
		if err := pad(); err != nil {
			return err
		}
		if err := put(e.Data); err != nil {
			return err
		}
		return pad()
	}
	for i, e := range entries {
		if err := write(uint32(i+1), e); err != nil {
			return fmt.Errorf("cpio member %s: %w", e.Name, err)
		}
	}
	if err := write(0, cpioEntry{Name: "TRAILER!!!"}); err != nil {
		return err
	}
	return bw.Flush()
}
