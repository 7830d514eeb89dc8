package hypervisor

import (
	"bufio"
	"fmt"
	"io"
	"os"
)

// cpioEntry is one member of a "newc" (SVR4, no CRC) cpio archive, the format
// the kernel unpacks as an initramfs.
type cpioEntry struct {
	name         string
	mode         uint32 // file type bits | permissions
	rdevMajor    uint32
	rdevMinor    uint32
	data         []byte
	fromFilePath string // read data from this file instead
}

const (
	cpioDir  = 0o040000
	cpioReg  = 0o100000
	cpioChar = 0o020000
)

// writeCPIO writes entries as a newc archive followed by the trailer.
func writeCPIO(w io.Writer, entries []cpioEntry) error {
	bw := bufio.NewWriter(w)
	var off int64
	pad := func() error {
		for off%4 != 0 {
			if err := bw.WriteByte(0); err != nil {
				return err
			}
			off++
		}
		return nil
	}
	write := func(ino uint32, e cpioEntry) error {
		data := e.data
		if e.fromFilePath != "" {
			var err error
			if data, err = os.ReadFile(e.fromFilePath); err != nil {
				return err
			}
		}
		nlink := uint32(1)
		if e.mode&cpioDir != 0 {
			nlink = 2
		}
		hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
			ino, e.mode, 0, 0, nlink, 0, len(data), 0, 0, e.rdevMajor, e.rdevMinor, len(e.name)+1, 0)
		n, err := bw.WriteString(hdr + e.name + "\x00")
		off += int64(n)
		if err != nil {
			return err
		}
		if err := pad(); err != nil {
			return err
		}
		n, err = bw.Write(data)
		off += int64(n)
		if err != nil {
			return err
		}
		return pad()
	}
	for i, e := range entries {
		if err := write(uint32(i+1), e); err != nil {
			return fmt.Errorf("cpio member %s: %w", e.name, err)
		}
	}
	if err := write(0, cpioEntry{name: "TRAILER!!!"}); err != nil {
		return err
	}
	return bw.Flush()
}

// writeBusyboxInitrd writes an initramfs whose /init prints marker (and the
// guest's uptime) on the console, then sleeps until the VM is destroyed.
func writeBusyboxInitrd(path, busybox, marker string) error {
	script := "#!/bin/busybox sh\n" +
		"/bin/busybox mount -t proc proc /proc\n" +
		"/bin/busybox echo \"" + marker + " uptime $(/bin/busybox cut -d' ' -f1 /proc/uptime)\"\n" +
		"exec /bin/busybox sleep 3600\n"
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	err = writeCPIO(f, []cpioEntry{
		{name: ".", mode: cpioDir | 0o755},
		{name: "bin", mode: cpioDir | 0o755},
		{name: "dev", mode: cpioDir | 0o755},
		{name: "dev/console", mode: cpioChar | 0o600, rdevMajor: 5, rdevMinor: 1},
		{name: "proc", mode: cpioDir | 0o755},
		{name: "bin/busybox", mode: cpioReg | 0o755, fromFilePath: busybox},
		{name: "init", mode: cpioReg | 0o755, data: []byte(script)},
	})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
