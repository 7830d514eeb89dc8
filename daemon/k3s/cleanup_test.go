package k3s

import (
	"fmt"
	"os"
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
	// The daemon under test: a node with its own run dir and cgroup root (/osd-node2).
	p := Paths{StateDir: "/tmp/t/node2/state", RunDir: "/tmp/t/node2/run", CgroupRoot: "/osd-node2"}
	own := Owner{Socket: p.ContainerdSocket(), Config: p.ContainerdConfig(), PodsCgroup: p.PodsCgroup(), MountNS: "mnt:[100]"}
	// The host's dev daemon: default dirs and cgroup root.
	host := Paths{StateDir: "/var/lib/osd", RunDir: "/run/osd"}
	hostOwner := Owner{Socket: host.ContainerdSocket(), Config: host.ContainerdConfig(), PodsCgroup: host.PodsCgroup(), MountNS: "mnt:[1]"}
	shim := func(sock string) []string {
		return []string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "k8s.io", "-id", "abc", "-address", sock}
	}
	tests := []struct {
		name  string
		proc  Proc
		owner Owner
		want  bool
	}{
		{"own shim", Proc{Args: shim(p.ContainerdSocket()), MountNS: "mnt:[100]"}, own, true},
		{"own containerd", Proc{Args: []string{"containerd", "--config", p.ContainerdConfig()}, MountNS: "mnt:[100]"}, own, true},
		{"own containerd, --config=", Proc{Args: []string{"containerd", "--config=" + p.ContainerdConfig()}, MountNS: "mnt:[100]"}, own, true},
		{"own pod process", Proc{Args: []string{"/pause"}, Cgroup: "12:memory:/osd-node2/kubepods/besteffort/podx/abc\n3:cpu:/osd-node2/kubepods/podx\n"}, own, true},
		{"own pods cgroup itself", Proc{Args: []string{"x"}, Cgroup: "4:pids:/osd-node2/kubepods\n"}, own, true},
		{"host pod is not the test node's", Proc{Args: []string{"/pause"}, Cgroup: "12:memory:/kubepods/besteffort/podx/abc\n"}, own, false},
		{"test node's pod is not the host's", Proc{Args: []string{"/pause"}, Cgroup: "12:memory:/osd-node2/kubepods/besteffort/podx/abc\n"}, hostOwner, false},
		{"host pod is the host's", Proc{Args: []string{"/pause"}, Cgroup: "12:memory:/kubepods/burstable/pody/def\n"}, hostOwner, true},
		{"similar cgroup name", Proc{Args: []string{"x"}, Cgroup: "12:memory:/kubepods-other/x\n"}, hostOwner, false},
		{"host shim is not the test node's", Proc{Args: shim(host.ContainerdSocket()), MountNS: "mnt:[1]"}, own, false},
		{"socket path that only ends like the host's", Proc{Args: shim("/tmp/x" + host.ContainerdSocket()), MountNS: "mnt:[1]"}, hostOwner, false},
		{"same socket path in another mount namespace", Proc{Args: shim(host.ContainerdSocket()), MountNS: "mnt:[7]"}, hostOwner, false},
		{"same socket, namespace unknown", Proc{Args: shim(host.ContainerdSocket())}, hostOwner, true},
		{"other shim", Proc{Args: shim("/run/containerd/containerd.sock"), Cgroup: "12:memory:/system.slice/containerd.service\n"}, hostOwner, false},
		{"sshd", Proc{Args: []string{"/usr/sbin/sshd", "-D"}, Cgroup: "12:memory:/system.slice/ssh.service\n"}, own, false},
		{"program named like the socket", Proc{Args: []string{p.ContainerdSocket()}}, own, false},
		{"root cgroup owner matches no pod", Proc{Args: []string{"x"}, Cgroup: "12:memory:/\n"}, Owner{PodsCgroup: "/"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsLeftover(tt.proc, tt.owner); got != tt.want {
				t.Errorf("IsLeftover(%+v, %+v) = %v, want %v", tt.proc, tt.owner, got, tt.want)
			}
		})
	}
}

func TestPodsCgroup(t *testing.T) {
	for _, tt := range []struct{ root, want string }{
		{"", "/kubepods"}, {"/", "/kubepods"}, {"/osd-node2", "/osd-node2/kubepods"}, {"osd-node2/", "/osd-node2/kubepods"},
	} {
		if got := (Paths{CgroupRoot: tt.root}).PodsCgroup(); got != tt.want {
			t.Errorf("PodsCgroup(%q) = %q, want %q", tt.root, got, tt.want)
		}
	}
}

// TestCgroupRoot creates and removes a cgroup root in the host's real cgroup hierarchies
// (a name no one else uses), with a nested child as the kubelet would make.
func TestCgroupRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create cgroups")
	}
	root := fmt.Sprintf("/osd-test-%d", os.Getpid())
	dirs, err := CgroupDirs(cgroupMount, root)
	if err != nil || len(dirs) == 0 {
		t.Fatalf("CgroupDirs(%s) = %v, %v, want at least one hierarchy", root, dirs, err)
	}
	t.Cleanup(func() { RemoveCgroupRoot(root) })
	if err := EnsureCgroupRoot(root); err != nil {
		t.Fatalf("EnsureCgroupRoot(%s) = %v", root, err)
	}
	if err := EnsureCgroupRoot(root); err != nil {
		t.Fatalf("EnsureCgroupRoot(%s) again = %v", root, err)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("after EnsureCgroupRoot: %v", err)
		}
		if strings.Contains(d, "/cpuset/") {
			if b, _ := os.ReadFile(d + "/cpuset.cpus"); strings.TrimSpace(string(b)) == "" {
				t.Errorf("%s/cpuset.cpus is empty, want the parent's cpus", d)
			}
		}
	}
	if err := os.Mkdir(dirs[0]+"/kubepods", 0o755); err != nil {
		t.Fatal(err)
	}
	n, err := RemoveCgroupRoot(root)
	if err != nil || n != len(dirs)+1 {
		t.Errorf("RemoveCgroupRoot(%s) = %d, %v, want %d, nil", root, n, err, len(dirs)+1)
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s after RemoveCgroupRoot: %v, want it gone", d, err)
		}
	}
	if d, _ := CgroupDirs(cgroupMount, "/"); d != nil {
		t.Errorf("CgroupDirs(/) = %v, want none (the host root is never ours)", d)
	}
}

// TestHostDirMountPoints: a host dir that is a mount point keeps its mount and loses only
// its content (what Cleanup does for private kubelet dirs); others are not mount points.
func TestHostDirMountPoints(t *testing.T) {
	if !isMountPoint("/proc") {
		t.Error("isMountPoint(/proc) = false, want true")
	}
	dir := t.TempDir()
	if isMountPoint(dir) {
		t.Errorf("isMountPoint(%s) = true, want false", dir)
	}
	os.MkdirAll(dir+"/pods/x/volumes", 0o755)
	os.WriteFile(dir+"/cpu_manager_state", []byte("{}"), 0o600)
	if err := removeContents(dir); err != nil {
		t.Fatalf("removeContents() = %v", err)
	}
	if ents, err := os.ReadDir(dir); err != nil || len(ents) != 0 {
		t.Errorf("after removeContents: %d entries, %v, want the dir empty and still there", len(ents), err)
	}
}
