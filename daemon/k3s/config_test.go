package k3s

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

func TestServerArgs(t *testing.T) {
	base := Config{Paths: Paths{StateDir: "/s", RunDir: "/r"}, NodeName: "n1"}
	tests := []struct {
		name    string
		cfg     Config
		want    []string // pairs or flags that must appear, in order
		wantErr string
	}{
		{name: "defaults", cfg: base, want: []string{"--data-dir", "/s/k3s", "--write-kubeconfig-mode", "0600",
			"--container-runtime-endpoint", "unix:///r/containerd/containerd.sock", "--secrets-encryption", "--flannel-backend", "none", "--https-listen-port", "6443", "eviction-hard=" + EvictionHard}},
		{name: "node ip and labels", cfg: func() Config { c := base; c.NodeIP = "10.0.0.5"; c.NodeLabels = []string{"a=b"}; return c }(),
			want: []string{"--node-ip", "10.0.0.5", "--node-label", "a=b"}},
		{name: "bad label", cfg: func() Config { c := base; c.NodeLabels = []string{"nolabel"}; return c }(), wantErr: "key=value"},
		{name: "no node name", cfg: Config{Paths: base.Paths}, wantErr: "node name"},
		{name: "no dirs", cfg: Config{NodeName: "x"}, wantErr: "state dir"},
		{name: "own cgroup root", cfg: func() Config { c := base; c.CgroupRoot = "/osd-n1"; return c }(),
			want: []string{"cgroup-root=/osd-n1", "conntrack-max-per-core=0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ServerArgs(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ServerArgs() error = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ServerArgs() error = %v", err)
			}
			for i := 0; i < len(tt.want); i++ {
				j := slices.Index(got, tt.want[i])
				if j < 0 {
					t.Fatalf("ServerArgs() = %v, want it to contain %q", got, tt.want[i])
				}
				if strings.HasPrefix(tt.want[i], "--") && i+1 < len(tt.want) && !strings.HasPrefix(tt.want[i+1], "--") {
					if j+1 >= len(got) || got[j+1] != tt.want[i+1] {
						t.Fatalf("ServerArgs() %s = %v, want %q", tt.want[i], got, tt.want[i+1])
					}
					i++
				}
			}
			if d := got[slices.Index(got, "--disable")+1]; !strings.Contains(d, "coredns") || !strings.Contains(d, "traefik") {
				t.Errorf("ServerArgs() --disable = %q, want coredns and traefik disabled", d)
			}
		})
	}
}

func TestAgentArgs(t *testing.T) {
	base := Config{Paths: Paths{StateDir: "/s", RunDir: "/r", CgroupRoot: "osd-n2"}, NodeName: "n2",
		NodeLabels: []string{"openstack-control-plane=enabled"}}
	got, err := AgentArgs(base, "https://10.99.0.1:6443", "K10abc::server:xyz")
	if err != nil {
		t.Fatalf("AgentArgs() = %v", err)
	}
	want := map[string]string{
		"--server": "https://10.99.0.1:6443", "--token": "K10abc::server:xyz", "--node-name": "n2", "--data-dir": "/s/k3s",
		"--container-runtime-endpoint": "unix:///r/containerd/containerd.sock", "--node-label": "openstack-control-plane=enabled",
	}
	if got[0] != "agent" {
		t.Errorf("AgentArgs()[0] = %q, want agent", got[0])
	}
	for flag, v := range want {
		if i := slices.Index(got, flag); i < 0 || i+1 >= len(got) || got[i+1] != v {
			t.Errorf("AgentArgs() %s = %v, want %q", flag, got, v)
		}
	}
	if !slices.Contains(got, "eviction-hard="+EvictionHard) {
		t.Errorf("AgentArgs() = %v, want the kubelet's eviction thresholds", got)
	}
	if !slices.Contains(got, JoinLabel+"="+JoinDigest("K10abc::server:xyz")) {
		t.Errorf("AgentArgs() = %v, want the node label %s with the join's digest", got, JoinLabel)
	}
	if !slices.Contains(got, "cgroup-root=/osd-n2") {
		t.Errorf("AgentArgs() = %v, want kubelet cgroup-root=/osd-n2", got)
	}
	for _, server := range []string{"--disable", "--cluster-cidr", "--write-kubeconfig", "--https-listen-port"} {
		if slices.Contains(got, server) {
			t.Errorf("AgentArgs() = %v, want no server flag %s", got, server)
		}
	}
	for _, tt := range []struct{ url, token, wantErr string }{
		{"http://10.0.0.1:6443", "t", "https"},
		{"https://10.0.0.1:6443", "", "token"},
	} {
		if _, err := AgentArgs(base, tt.url, tt.token); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("AgentArgs(%q, %q) = %v, want an error about %s", tt.url, tt.token, err, tt.wantErr)
		}
	}
	if _, err := AgentArgs(Config{Paths: base.Paths}, "https://x:1", "t"); err == nil {
		t.Error("AgentArgs(no node name) = nil, want an error")
	}
}

func TestContainerdConfig(t *testing.T) {
	c := Config{Paths: Paths{StateDir: "/var/lib/osd", RunDir: "/run/osd"}}
	got := ContainerdConfig(c)
	for _, want := range []string{
		"version = 3",
		"restrict_oom_score_adj = true",
		`address = "/run/osd/containerd/containerd.sock"`,
		`root = "/var/lib/osd/containerd/root"`,
		`bin_dirs = ["/usr/lib/cni"]`,
		`conf_dir = "/var/lib/osd/cni/net.d"`,
		`sandbox = "docker.io/rancher/mirrored-pause:3.6"`,
		"SystemdCgroup = false",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("ContainerdConfig() lacks %q:\n%s", want, got)
		}
	}
}

func TestCNIConfig(t *testing.T) {
	tests := []struct {
		cidr, wantSubnet, wantGW, wantErr string
	}{
		{cidr: "10.42.0.0/24", wantSubnet: "10.42.0.0/24", wantGW: "10.42.0.1"},
		{cidr: "10.42.3.7/24", wantSubnet: "10.42.3.0/24", wantGW: "10.42.3.1"},
		{cidr: "fd00::/64", wantErr: "IPv4"},
		{cidr: "10.0.0.0/31", wantErr: "/30"},
		{cidr: "garbage", wantErr: "garbage"},
	}
	for _, tt := range tests {
		t.Run(tt.cidr, func(t *testing.T) {
			got, err := CNIConfig(tt.cidr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("CNIConfig(%q) error = %v, want containing %q", tt.cidr, err, tt.wantErr)
				}
				return
			}
			var conf struct {
				Plugins []struct {
					Type   string
					Bridge string
					IPAM   struct {
						Ranges [][]struct{ Subnet, Gateway string }
					}
				}
			}
			if err := json.Unmarshal(got, &conf); err != nil {
				t.Fatalf("CNIConfig(%q) is not JSON: %v", tt.cidr, err)
			}
			p := conf.Plugins[0]
			if p.Type != "bridge" || p.Bridge != BridgeName {
				t.Errorf("CNIConfig(%q) first plugin = %s/%s, want bridge/%s", tt.cidr, p.Type, p.Bridge, BridgeName)
			}
			r := p.IPAM.Ranges[0][0]
			if r.Subnet != tt.wantSubnet || r.Gateway != tt.wantGW {
				t.Errorf("CNIConfig(%q) range = %s via %s, want %s via %s", tt.cidr, r.Subnet, r.Gateway, tt.wantSubnet, tt.wantGW)
			}
		})
	}
}

func TestRBACManifest(t *testing.T) {
	got, err := RBACManifest("n1")
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(got), "\n---\n")
	names := map[string]bool{}
	for _, d := range docs {
		var o struct {
			Kind     string
			Metadata struct{ Name string }
		}
		if err := yaml.Unmarshal([]byte(d), &o); err != nil {
			t.Fatalf("RBACManifest() document is not YAML: %v\n%s", err, d)
		}
		names[o.Kind+"/"+o.Metadata.Name] = true
	}
	for _, want := range []string{"ClusterRoleBinding/kube-apiserver-kubelet-admin", "ClusterRole/k3s-cloud-controller-manager", "RoleBinding/k3s-cloud-controller-manager-authentication-reader"} {
		if !names[want] {
			t.Errorf("RBACManifest() lacks %s; has %v", want, names)
		}
	}
}

func TestNodeReadiness(t *testing.T) {
	since := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(since.Add(time.Second))}
	stale := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(since.Add(-time.Hour))}
	notReady := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady", Message: "container runtime network not ready: cni config uninitialized"}
	tests := []struct {
		name       string
		node       corev1.Node
		wantReady  bool
		wantReason string
	}{
		{"ready", corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}, true, ""},
		{"cni missing", corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{notReady}}}, false, "cni config uninitialized"},
		{"uninitialized taint", corev1.Node{Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized"}}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}, false, "cloud controller"},
		{"no condition", corev1.Node{}, false, "no Ready condition"},
		{"cordoned", corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{ready}}}, true, "cordoned"},
		{"ready before the restart", corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{stale}}},
			false, "node n1 has not reported since 2026-11-23T12:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, reason := NodeReadiness(&tt.node, since)
			if ok != tt.wantReady || !strings.Contains(reason, tt.wantReason) {
				t.Errorf("NodeReadiness() = %v, %q, want %v, containing %q", ok, reason, tt.wantReady, tt.wantReason)
			}
		})
	}
}

func TestIsShimPublish(t *testing.T) {
	tests := []struct {
		args []string
		want bool
	}{
		{[]string{"/usr/local/bin/osd", "--address", "/run/osd/containerd/containerd.sock", "publish", "--topic", "/tasks/exit"}, true},
		{[]string{"/usr/local/bin/osd", "status"}, false},
		{[]string{"osd", "--address"}, false},
	}
	for _, tt := range tests {
		if got := isShimPublish(tt.args); got != tt.want {
			t.Errorf("isShimPublish(%v) = %v, want %v", tt.args, got, tt.want)
		}
	}
}

func TestReadyzReason(t *testing.T) {
	tests := []struct {
		name, body string
		err        error
		want       string
	}{
		{"hooks", "[+]ping ok\n[-]poststarthook/start-informers failed: reason withheld\n[-]etcd failed: reason withheld\nreadyz check failed", nil,
			"API server starting: waiting for start-informers, etcd"},
		{"no answer", "", errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"), "API server not answering: dial tcp"},
		{"odd body", "something", nil, "API server not ready: something"},
	}
	for _, tt := range tests {
		if got := ReadyzReason(tt.body, tt.err); !strings.HasPrefix(got, tt.want) {
			t.Errorf("ReadyzReason(%s) = %q, want prefix %q", tt.name, got, tt.want)
		}
	}
}

// TestEvictionHard: every signal the kubelet evicts on is named (naming one drops the
// kubelet's default for the others), and the disk ones are absolute, small amounts, not
// the kubelet's percentages that are tens of GB on a large disk.
func TestEvictionHard(t *testing.T) {
	got := map[string]string{}
	for _, kv := range strings.Split(EvictionHard, ",") {
		k, v, ok := strings.Cut(kv, "<")
		if !ok {
			t.Fatalf("EvictionHard %q: %q is not signal<threshold", EvictionHard, kv)
		}
		got[k] = v
	}
	for _, s := range []string{"memory.available", "nodefs.available", "imagefs.available", "nodefs.inodesFree", "imagefs.inodesFree"} {
		if got[s] == "" {
			t.Errorf("EvictionHard %q lacks %s", EvictionHard, s)
		}
	}
	for _, s := range []string{"nodefs.available", "imagefs.available"} {
		q, err := resource.ParseQuantity(got[s])
		if err != nil || q.Value() > 2<<30 {
			t.Errorf("EvictionHard %s<%s: want an absolute amount of at most 2 GiB (%v)", s, got[s], err)
		}
	}
}
