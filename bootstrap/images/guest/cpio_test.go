package guest

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

func TestWriteCPIOHeader(t *testing.T) {
	var b bytes.Buffer
	if err := writeCPIO(&b, []cpioEntry{{Name: "init", Mode: cpioReg | 0o755, Data: []byte("abc")}}); err != nil {
		t.Fatal(err)
	}
	// header (110) + "init\0" (5) -> padded to 116, data 3 -> 120, then the trailer.
	want := "070701" + "00000001" + "000081ed" + "00000000" + "00000000" + "00000001" + "00000000" +
		"00000003" + "00000000" + "00000000" + "00000000" + "00000000" + "00000005" + "00000000" + "init\x00\x00abc\x00"
	if got := b.String()[:len(want)]; got != want {
		t.Errorf("writeCPIO(init) = %q, want %q", got, want)
	}
	if b.Len()%4 != 0 || !strings.Contains(b.String(), "TRAILER!!!\x00") {
		t.Errorf("writeCPIO(init) length %d (want a multiple of 4) or no trailer", b.Len())
	}
}

// TestWriteCPIOReadByCpio checks the archive with GNU cpio (package cpio).
func TestWriteCPIOReadByCpio(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip("cpio missing (apt-get install cpio)")
	}
	entries := []cpioEntry{
		{Name: "bin", Mode: cpioDir | 0o755},
		{Name: "bin/busybox", Mode: cpioReg | 0o755, Data: []byte("12345")},
		{Name: "bin/sh", Mode: cpioSymlink | 0o777, Data: []byte("busybox")},
		{Name: "dev/console", Mode: cpioChar | 0o600, RdevMajor: 5, RdevMinor: 1},
	}
	var b bytes.Buffer
	if err := writeCPIO(&b, entries); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("cpio", "-itv", "--quiet")
	cmd.Stdin = &b
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("cpio -itv: %v: %s", err, out)
	}
	for _, want := range []string{"drwxr-xr-x", "bin/busybox", "bin/sh -> busybox", "crw-------", "dev/console"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("cpio -itv of writeCPIO = %q, want it to contain %q", out, want)
		}
	}
}
