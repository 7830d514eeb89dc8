package preflight

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
)

// modules is what the running kernel's module directory lists.
type modules struct {
	builtin map[string]bool // base names of built-in modules, e.g. "dm-mod.ko"
	dep     map[string]bool // base names of loadable modules
}

func readModules(dir string) modules {
	m := modules{builtin: map[string]bool{}, dep: map[string]bool{}}
	if dir == "" {
		return m
	}
	readList := func(name string, into map[string]bool) {
		file, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return
		}
		defer file.Close()
		sc := bufio.NewScanner(file)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			path, _, _ := strings.Cut(sc.Text(), ":")
			base := filepath.Base(path)
			// modules.dep may list compressed modules: foo.ko.xz, foo.ko.zst
			if i := strings.Index(base, ".ko"); i >= 0 {
				base = base[:i+3]
			}
			into[base] = true
		}
	}
	readList("modules.builtin", m.builtin)
	readList("modules.dep", m.dep)
	return m
}

// moduleState says whether a kernel feature is "loaded" (its module under
// /sys/module, or miscName registered in /proc/misc), "builtin",
// "loadable" (a module modprobe would find) or "absent".
func moduleState(cfg ProbeConfig, mods modules, sysName, koName, miscName string) string {
	if exists(filepath.Join(cfg.SysRoot, "module", sysName)) {
		return "loaded"
	}
	if miscName != "" && miscRegistered(filepath.Join(cfg.ProcRoot, "misc"), miscName) {
		return "loaded"
	}
	if mods.builtin[koName] {
		return "builtin"
	}
	if mods.dep[koName] {
		return "loadable"
	}
	return "absent"
}

func miscRegistered(path, name string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[1] == name {
			return true
		}
	}
	return false
}

// probeISCSI reads the kernel's iSCSI target (LIO) and initiator states.
func probeISCSI(f *Facts, cfg ProbeConfig, mods modules) {
	core := moduleState(cfg, mods, "target_core_mod", "target_core_mod.ko", "")
	iscsi := moduleState(cfg, mods, "iscsi_target_mod", "iscsi_target_mod.ko", "")
	f.ISCSITargetState = lesserState(core, iscsi)
	f.ISCSITarget = f.ISCSITargetState != "absent"
	f.ISCSIInitiatorState = moduleState(cfg, mods, "iscsi_tcp", "iscsi_tcp.ko", "")
	f.ISCSIInitiator = f.ISCSIInitiatorState != "absent"
}

// lesserState is the state of a feature that needs both modules: absent if either is,
// loadable if either must still be loaded.
func lesserState(a, b string) string {
	rank := map[string]int{"absent": 0, "loadable": 1, "builtin": 2, "loaded": 2}
	if rank[a] <= rank[b] {
		return a
	}
	return b
}
