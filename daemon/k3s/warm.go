package k3s

import (
	_ "github.com/k3s-io/k3s/pkg/cli/cmds"
	_ "github.com/k3s-io/k3s/pkg/cli/server"
	_ "github.com/k3s-io/k3s/pkg/containerd"
	_ "github.com/k3s-io/k3s/pkg/ctr"
	_ "github.com/k3s-io/k3s/pkg/kubectl"
	_ "sigs.k8s.io/cri-tools/cmd/crictl"
	_ "helm.sh/helm/v3/pkg/action"
)
