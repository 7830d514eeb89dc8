package daemon

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestNotifyAddr(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{"", "", false},
		{"/run/systemd/notify", "/run/systemd/notify", false},
		{"@abstract", "\x00abstract", false},
		{"@", "", true},
		{"relative/sock", "", true},
	}
	for _, tt := range tests {
		got, err := notifyAddr(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("notifyAddr(%q) = %q, %v, want %q (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestWatchdogPeriod(t *testing.T) {
	tests := []struct {
		name, usec, pid string
		want            time.Duration
		wantErr         bool
	}{
		{"no watchdog", "", "", 0, false},
		{"a quarter of WatchdogSec", "120000000", "", 30 * time.Second, false},
		{"for this process", "8000000", "42", 2 * time.Second, false},
		{"for another process", "8000000", "43", 0, false},
		{"zero", "0", "", 0, true},
		{"not a number", "2m", "", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := watchdogPeriod(tt.usec, tt.pid, 42)
			if got != tt.want || (err != nil) != tt.wantErr {
				t.Errorf("watchdogPeriod(%q, %q, 42) = %v, %v, want %v (error %v)", tt.usec, tt.pid, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestNotifierRun reads what the notifier sends on a real datagram socket: nothing until
// the probe answers, READY=1, WATCHDOG=1 only while the probe answers, STOPPING=1 at the end.
func TestNotifierRun(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var answering atomic.Bool
	probe := func(context.Context) error {
		if answering.Load() {
			return nil
		}
		return errors.New("not answering")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		notifier{addr: sock}.run(ctx, 20*time.Millisecond, probe)
		close(done)
	}()
	read := func(timeout time.Duration) string {
		conn.SetReadDeadline(time.Now().Add(timeout))
		buf := make([]byte, 512)
		n, err := conn.Read(buf)
		if err != nil {
			return ""
		}
		return string(buf[:n])
	}
	if got := read(200 * time.Millisecond); got != "" {
		t.Fatalf("before the API answers the notifier sent %q, want nothing", got)
	}
	answering.Store(true)
	if got := read(2 * time.Second); !strings.HasPrefix(got, "READY=1\n") {
		t.Fatalf("first notification = %q, want READY=1", got)
	}
	if got := read(2 * time.Second); got != "WATCHDOG=1" {
		t.Fatalf("second notification = %q, want WATCHDOG=1", got)
	}
	answering.Store(false)
	for read(100*time.Millisecond) != "" { // drain a ping already under way
	}
	if got := read(200 * time.Millisecond); got != "" {
		t.Errorf("while the API does not answer the notifier sent %q, want nothing", got)
	}
	cancel()
	<-done
	if got := read(2 * time.Second); got != "STOPPING=1" {
		t.Errorf("last notification = %q, want STOPPING=1", got)
	}
}
