// Package preflight owns osd's host checks: Probe reads the facts of the host
// (CPUs, memory, disk, ports, hostname, conflicting Kubernetes or container
// runtimes, virtualization, OVS datapath, device-mapper, packages), and the
// pure Evaluate and Decide turn facts into findings (ok, warn or fail, each
// with a one-line fix) and the host decisions init acts on (virt_type, OVS
// datapath, storage backend). `osd preflight` prints the findings; `osd init`
// stops when Failed reports a failure.
package preflight
