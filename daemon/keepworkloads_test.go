package daemon

import (
	"os"
	"testing"
	"time"

	"github.com/osdcloud/osd/daemon/client"
)

func TestKeepWorkloads(t *testing.T) {
	tests := []struct {
		name    string
		flag    bool
		request time.Duration // when the request was made relative to the start; 0: none
		want    bool
	}{
		{"default stop ends the workloads", false, 0, false},
		{"--keep-workloads", true, 0, true},
		{"requested since the start", false, time.Second, true},
		{"request older than the daemon", false, -time.Hour, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := t.TempDir()
			started := time.Now().Add(-time.Minute)
			d := &Daemon{cfg: Config{RunDir: run, KeepWorkloads: tt.flag}, started: started}
			if tt.request != 0 {
				if err := client.RequestKeepWorkloads(run); err != nil {
					t.Fatal(err)
				}
				at := started.Add(tt.request)
				os.Chtimes(client.KeepWorkloadsFile(run), at, at)
			}
			if got := d.keepWorkloads(); got != tt.want {
				t.Errorf("keepWorkloads() = %v, want %v", got, tt.want)
			}
			if _, err := os.Stat(client.KeepWorkloadsFile(run)); err == nil {
				t.Errorf("keepWorkloads() left the request file: a later stop would keep the workloads too")
			}
		})
	}
}
