package k3s

import (
	"os"
	"path/filepath"

	k3scontainerd "github.com/k3s-io/k3s/pkg/containerd"
	k3sctr "github.com/k3s-io/k3s/pkg/ctr"
	k3skubectl "github.com/k3s-io/k3s/pkg/kubectl"
	crictl "sigs.k8s.io/cri-tools/cmd/crictl"
)

// Tools are the names under which the osd binary behaves as another program.
var Tools = []string{"containerd", "kubectl", "ctr", "crictl"}

// Multicall runs the tool named by argv[0] when the binary was invoked under one of the
// Tools names (through a symlink in the state dir's bin directory), or when containerd's
// shim calls back into the containerd binary ("osd --address ... publish ..."), and reports
// whether it did. The tool's main may exit the process itself.
func Multicall(args []string) bool {
	if len(args) == 0 {
		return false
	}
	name := filepath.Base(args[0])
	if name != "containerd" && isShimPublish(args) {
		name = "containerd"
	}
	run, ok := map[string]func(){
		"containerd": k3scontainerd.Main,
		"kubectl":    k3skubectl.Main,
		"ctr":        k3sctr.Main,
		"crictl":     crictl.Main,
	}[name]
	if !ok {
		return false
	}
	os.Args = append([]string{name}, args[1:]...)
	run()
	return true
}

// isShimPublish reports whether args are a containerd shim's event publication: the shim
// runs containerd's own executable (which is osd, resolved through /proc/self/exe) as
// "<exe> --address SOCKET publish --topic ...".
func isShimPublish(args []string) bool {
	if len(args) < 3 || args[1] != "--address" {
		return false
	}
	for _, a := range args[2:] {
		if a == "publish" {
			return true
		}
	}
	return false
}

// RunTool runs one of the Tools in this process with the given arguments and the
// environment that points it at osd's own Kubernetes and containerd.
func RunTool(tool string, args []string, env map[string]string) bool {
	for k, v := range env {
		os.Setenv(k, v)
	}
	return Multicall(append([]string{tool}, args...))
}
