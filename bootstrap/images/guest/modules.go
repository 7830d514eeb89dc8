package guest

import (
	"bufio"
	"fmt"
	"path"
	"strings"
)

// NetModules are the drivers the guest needs for virtio networking (and the
// virtio disk Nova attaches); those built into the kernel are skipped.
var NetModules = []string{"virtio_pci", "virtio_net", "failover", "net_failover", "virtio_blk"}

// DriveModules read a config drive as Nova attaches it by default: an ISO 9660 CD-ROM on
// the IDE controller of QEMU's pc machine (ata_piix, the SCSI CD-ROM driver, isofs); their
// dependencies (libata, scsi_mod, cdrom) come with them.
var DriveModules = []string{"ata_piix", "sr_mod", "isofs"}

// PowerModules deliver the ACPI power button to busybox's acpid (the button driver and
// its input events), so that a soft power off from the hypervisor ends the guest.
var PowerModules = []string{"button", "evdev"}

// ModuleName is a module's name from its path in modules.dep or
// modules.builtin ("kernel/drivers/net/virtio_net.ko" -> "virtio_net";
// dashes and underscores are the same to the kernel).
func ModuleName(p string) string {
	base := path.Base(p)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// ParseModulesDep reads depmod's modules.dep ("path: dep dep ...") into
// module path -> dependency paths.
func ParseModulesDep(content string) (map[string][]string, error) {
	deps := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(content))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		mod, rest, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(mod) == "" {
			return nil, fmt.Errorf("modules.dep line %d: want \"path: deps\", got %q", n, line)
		}
		deps[strings.TrimSpace(mod)] = strings.Fields(rest)
	}
	return deps, sc.Err()
}

// ModuleLoadOrder returns the module paths to insmod, dependencies first, so
// that every module in want is loaded. Modules listed in builtin (the
// kernel's modules.builtin) need nothing; a name that is neither a module
// nor built in is an error.
func ModuleLoadOrder(deps map[string][]string, builtin string, want []string) ([]string, error) {
	byName := map[string]string{}
	for p := range deps {
		byName[ModuleName(p)] = p
	}
	isBuiltin := map[string]bool{}
	for _, l := range strings.Fields(builtin) {
		isBuiltin[ModuleName(l)] = true
	}
	var order []string
	state := map[string]int{} // 1 visiting, 2 done
	var visit func(p string, chain []string) error
	visit = func(p string, chain []string) error {
		switch state[p] {
		case 2:
			return nil
		case 1:
			return fmt.Errorf("module dependency cycle: %s", strings.Join(append(chain, ModuleName(p)), " -> "))
		}
		state[p] = 1
		ds, ok := deps[p]
		if !ok {
			return fmt.Errorf("module %s (needed by %s) is not in modules.dep", p, strings.Join(chain, " -> "))
		}
		for _, d := range ds {
			if err := visit(d, append(chain, ModuleName(p))); err != nil {
				return err
			}
		}
		state[p] = 2
		order = append(order, p)
		return nil
	}
	for _, w := range want {
		name := ModuleName(w)
		p, ok := byName[name]
		if !ok {
			if isBuiltin[name] {
				continue
			}
			return nil, fmt.Errorf("module %s is neither in modules.dep nor built into the kernel", name)
		}
		if err := visit(p, nil); err != nil {
			return nil, err
		}
	}
	return order, nil
}
