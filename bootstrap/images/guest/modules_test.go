package guest

import (
	"slices"
	"strings"
	"testing"
)

// bookwormDep is an excerpt of modules.dep of Debian's 6.1 cloud kernel.
const bookwormDep = `kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/net/core/failover.ko:
kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio_pci_modern_dev.ko:
kernel/drivers/virtio/virtio_pci_legacy_dev.ko:
kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_legacy_dev.ko kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
`

func TestModuleName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"kernel/drivers/net/virtio_net.ko", "virtio_net"},
		{"kernel/drivers/net/virtio_net.ko.xz", "virtio_net"},
		{"kernel/drivers/net/net-failover.ko", "net_failover"},
		{"virtio_pci", "virtio_pci"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := ModuleName(tc.in); got != tc.want {
				t.Errorf("ModuleName(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestModuleLoadOrder(t *testing.T) {
	deps, err := ParseModulesDep(bookwormDep)
	if err != nil {
		t.Fatalf("ParseModulesDep: %v", err)
	}
	short := func(ps []string) string {
		var n []string
		for _, p := range ps {
			n = append(n, ModuleName(p))
		}
		return strings.Join(n, " ")
	}
	for _, tc := range []struct {
		name    string
		builtin string
		want    []string
		order   string
		err     string
	}{
		{name: "virtio net and pci", want: []string{"virtio_pci", "virtio_net"},
			order: "virtio_pci_legacy_dev virtio_pci_modern_dev virtio_ring virtio virtio_pci failover net_failover virtio_net"},
		{name: "net alone", want: []string{"virtio_net"}, order: "failover net_failover virtio_ring virtio virtio_net"},
		{name: "asked twice", want: []string{"failover", "net_failover", "failover"}, order: "failover net_failover"},
		{name: "built in is skipped", builtin: "kernel/drivers/block/virtio_blk.ko\n", want: []string{"virtio_blk", "failover"}, order: "failover"},
		{name: "unknown", want: []string{"e1000"}, err: "module e1000 is neither in modules.dep nor built into the kernel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ModuleLoadOrder(deps, tc.builtin, tc.want)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("ModuleLoadOrder(%v) error = %v, want %q", tc.want, err, tc.err)
				}
				return
			}
			if err != nil || short(got) != tc.order {
				t.Errorf("ModuleLoadOrder(%v) = %q, %v, want %q", tc.want, short(got), err, tc.order)
			}
		})
	}
}

func TestModuleLoadOrderErrors(t *testing.T) {
	for _, tc := range []struct{ name, dep, err string }{
		{"cycle", "a.ko: b.ko\nb.ko: a.ko\n", "module dependency cycle: a -> b -> a"},
		{"dangling dependency", "a.ko: b.ko\n", "module b.ko (needed by a) is not in modules.dep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deps, err := ParseModulesDep(tc.dep)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ModuleLoadOrder(deps, "", []string{"a"}); err == nil || err.Error() != tc.err {
				t.Errorf("ModuleLoadOrder(%q) error = %v, want %q", tc.dep, err, tc.err)
			}
		})
	}
	if _, err := ParseModulesDep("no colon here\n"); err == nil {
		t.Error("ParseModulesDep(no colon) = nil error, want an error")
	}
	deps, _ := ParseModulesDep(bookwormDep)
	if got := deps["kernel/net/core/failover.ko"]; got == nil || len(got) != 0 {
		t.Errorf("ParseModulesDep(failover without deps) = %v, want empty, present", got)
	}
	if !slices.Equal(deps["kernel/drivers/net/net_failover.ko"], []string{"kernel/net/core/failover.ko"}) {
		t.Errorf("ParseModulesDep(net_failover) = %v", deps["kernel/drivers/net/net_failover.ko"])
	}
}
