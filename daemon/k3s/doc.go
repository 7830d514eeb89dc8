// Package k3s owns the embedded Kubernetes: it is the only package that imports
// github.com/k3s-io/k3s. It renders the files k3s and containerd need (server flags,
// containerd configuration, CNI configuration, RBAC manifests), runs the k3s server and
// agent in the daemon's process, supervises the containerd child process, dispatches the
// multicall tools (containerd, kubectl, ctr, crictl) and undoes the host changes on reset.
package k3s
