// Package test holds osd's end-to-end suites: they run the built osd binary (OSD_BIN, or
// ../bin/osd from `make build`) as root against the real embedded Kubernetes, containerd,
// Open vSwitch and libvirt on this host, and clean up what they create.
//
// # One deployed cloud for every end-to-end test
//
// Deploying the whole cloud takes minutes, so the test binary deploys it once and every
// end-to-end test uses that deployment:
//
//   - sharedCloud(t) is the one way to get it. The first call deploys: osd init on a fresh
//     state dir, the daemon killed (SIGKILL) once a Helm release exists, restarted, osd init
//     again, every release Ready (the timings are logged). Later calls return the same
//     node; when the deployment failed, every caller fails with its reason.
//   - TestMain tears it down (daemon stopped, osd reset) after the tests, failed or not,
//     and also on SIGINT/SIGTERM and a few minutes before the binary's -timeout ends (the
//     testing package exits at the timeout without running any cleanup).
//   - TestOpenStackE2E deploys it and runs every registered group as a subtest, in stages:
//     stageCheck groups first (each deletes what it makes), then stageAudit groups (nothing
//     is left behind in Nova, Neutron, OVN or libvirt; a re-run of osd init changes
//     nothing), then stageDestructive groups (a power cut, a package upgrade: what stops,
//     kills or replaces part of the cloud). A destructive group must leave the cloud
//     converged, or call markBroken: the groups after it are then skipped with the reason.
//     Within a stage groups run in registration order.
//
// A new end-to-end check is a group:
//
//	func init() { registerE2E("volumes", stageCheck, checkVolumes) }
//
//	func checkVolumes(t *testing.T, n *node) {
//		out, err := n.openstack("volume", "create", "--size", "1", "e2e-vol") // clouds.yaml of the cloud
//		...
//	}
//
// node has what a check needs: openstack (Debian's client with the cloud's clouds.yaml),
// osd (the CLI), kubectl, query (the daemon's REST API), field, ovnCounts, stateDir.
// `go test -run 'TestOpenStackE2E/volumes' ./test/` runs one group (after the deployment).
// Destructive checks must be groups of stageDestructive, never top-level tests: only then
// are they guaranteed to run after every other use of the cloud.
//
// # Tests that need the host to themselves
//
// TestDaemonLifecycle runs its own daemon in the host's namespaces (k3s's ports, /run/k3s,
// the kubelet's and CNI's directories, br-ex), and TestTwoNodeCluster runs two nodes in
// namespaces of their own that still share the host's CPUs, kernel settings and cgroups.
// They cannot run beside the shared cloud, so they run before it: `go test` runs a
// package's tests in the order of its files' names and then of their source, and both
// live in files that sort before e2e_test.go. Each calls hostToItself, which fails the test
// if the shared cloud is up (a new such test in a file sorting after e2e_test.go would
// find it up), and which in a benchmark (benchmarks run after every test) tears the shared
// cloud down first: BenchmarkOpenStack measures a fresh deployment of its own.
package test
