package k3s

import (
	"strings"
	"testing"
)

func TestFilterRules(t *testing.T) {
	dump := `*nat
:PREROUTING ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:CNI-abc123 - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -s 10.42.0.0/24 -j CNI-abc123
-A POSTROUTING -s 172.24.4.0/24 -j MASQUERADE
COMMIT
*filter
:INPUT ACCEPT [0:0]
-A INPUT -p tcp --dport 22 -j ACCEPT
COMMIT
`
	kept, removed := FilterRules(dump)
	if removed != 4 {
		t.Errorf("FilterRules() removed %d lines, want 4", removed)
	}
	for _, want := range []string{"-A POSTROUTING -s 172.24.4.0/24 -j MASQUERADE", "--dport 22", "*filter", "COMMIT"} {
		if !strings.Contains(kept, want) {
			t.Errorf("FilterRules() dropped %q:\n%s", want, kept)
		}
	}
	if strings.Contains(kept, "KUBE-") || strings.Contains(kept, "CNI-") {
		t.Errorf("FilterRules() kept kubernetes rules:\n%s", kept)
	}
	if k, n := FilterRules("*filter\nCOMMIT\n"); n != 0 || k != "*filter\nCOMMIT\n" {
		t.Errorf("FilterRules(clean) = %q, %d, want unchanged, 0", k, n)
	}
}

func TestIsLeftover(t *testing.T) {
	sock, conf := "/run/osd/containerd/containerd.sock", "/var/lib/osd/containerd/config.toml"
	tests := []struct {
		name, cmdline, cgroup string
		want                  bool
	}{
		{"shim", "/usr/bin/containerd-shim-runc-v2 -namespace k8s.io -id abc -address /run/osd/containerd/containerd.sock", "", true},
		{"containerd", "containerd --config /var/lib/osd/containerd/config.toml", "", true},
		{"pod process", "/pause", "12:memory:/kubepods/besteffort/podx/abc\n", true},
		{"other shim", "/usr/bin/containerd-shim-runc-v2 -address /run/containerd/containerd.sock", "12:memory:/system.slice/containerd.service\n", false},
		{"sshd", "/usr/sbin/sshd -D", "12:memory:/system.slice/ssh.service\n", false},
	}
	for _, tt := range tests {
		if got := IsLeftover(tt.cmdline, tt.cgroup, sock, conf); got != tt.want {
			t.Errorf("IsLeftover(%s) = %v, want %v", tt.name, got, tt.want)
		}
	}
}
