package test

import (
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/osdcloud/osd"

// cliInProcess are the CLI files that run code in the CLI's own process and so import
// what they run: the daemon command, osd reset (with the daemon stopped), osd preflight
// (it must work before any daemon runs), and the multicall entry point with its tools.
var cliInProcess = []string{"cmd/osd/daemon.go", "cmd/osd/reset.go", "cmd/osd/preflight.go", "cmd/osd/main.go", "cmd/osd/tools.go"}

// cliHostWrites are the CLI files that write files on the CLI's own host, each with the one
// package it may import for that: `osd daemon restart --backup-state` (service.go) copies
// the state database with the daemon stopped, through the atomic-write helper.
var cliHostWrites = map[string]string{"cmd/osd/service.go": module + "/bootstrap/fsutil"}

// The daemon's packages are resources or libraries. A resource owns part of the API and
// is made by the composition root (package daemon) with what it needs: constructor
// parameters, interfaces it defines and another resource satisfies (TestWiringThroughConstructors).
// No resource imports another; what two share lives in a library below both. A library is
// shared by the resources and the root and imports no resource.
var (
	daemonResources = []string{"converge", "deployment", "images", "join", "launch", "members", "reset", "storage"}
	// cluster is a library: the cluster's rules (CA, certificates, tokens, trust, roles,
	// both sides of the join) that join, members, node and the root use; its server side
	// asks the rest of the daemon through one interface, cluster.Hooks (members implements
	// it). hostplan is the host plan init and join share; deploy the deployment controller
	// (values, Helm) and openstack the OpenStack client, both used by several resources.
	daemonLibraries = []string{"api", "client", "cluster", "deploy", "hostplan", "k3s", "node", "openstack", "operations", "ovnchassis", "rest", "state", "store"}
	// resourceImports are the imports between resources that remain ("from>to" -> why),
	// each through a named interface of a library: none.
	resourceImports = map[string]string{}
)

// daemonPart says where a daemon package is (its import path, or its file's directory,
// module-relative): "root" for package daemon, the top directory under daemon/ for the
// others ("deploy" for daemon/deploy/helmclient), "" outside daemon/.
func daemonPart(dir string) string {
	if dir == "daemon" {
		return "root"
	}
	rest, ok := strings.CutPrefix(dir, "daemon/")
	if !ok {
		return ""
	}
	top, _, _ := strings.Cut(rest, "/")
	return top
}

// daemonOutside are the only imports of daemon packages from outside daemon/ but cmd/osd
// (the CLI rule) and test/ (the suites): whose files (a path prefix), whether only their
// tests, the package (module-relative; a trailing / takes its subpackages) and why.
var daemonOutside = []struct {
	under     string
	testsOnly bool
	imp       string
	why       string
}{
	{"bootstrap/", false, "daemon/api", "the step executor and preflight speak the wire types (api.Step, api.Finding); they move under daemon/ later"},
	{"bootstrap/", true, "daemon/store", "the step executor's tests run it over the real store"},
	{"charts/", true, "daemon/deploy", "the charts' tests render them with the real deploy code"},
	{"charts/", true, "daemon/deploy/", "(helmclient) the same"},
	{"charts/ceph_image_test.go", true, "daemon/storage", "the Ceph image's test runs the daemon's own status commands and parser in it"},
	{"charts/ceph_image_test.go", true, "daemon/api", "the parser's result (api.StorageStatus)"},
}

// importRules are the layering rules of the tree (docs/architecture.md "Layering"). Each gets a
// file's path (relative to the repository, slash-separated), whether it is a test file,
// and one of its imports, and returns why that import is not allowed ("" when it is).
var importRules = []func(file string, test bool, imp string) string{
	// The CLI talks to the daemon through its API types and client only.
	func(file string, test bool, imp string) string {
		if !strings.HasPrefix(file, "cmd/osd/") || test || slices.Contains(cliInProcess, file) {
			return ""
		}
		if strings.HasPrefix(imp, module+"/") && imp != module+"/daemon/api" && imp != module+"/daemon/client" && cliHostWrites[file] != imp {
			return "a CLI command talks to the daemon through daemon/api and daemon/client only"
		}
		return ""
	},
	// bootstrap is below the daemon: it imports no daemon package. One exception stays:
	// the wire types of daemon/api that the step executor (bootstrap.go: api.Step, the
	// journal's record of a step) and preflight (the storage backends and their minimum
	// size) share with the API; nothing else under bootstrap/ imports even daemon/api.
	// Its tests may run the step executor over the real store.
	func(file string, test bool, imp string) string {
		if !strings.HasPrefix(file, "bootstrap/") || test {
			return ""
		}
		if imp == module+"/daemon/api" && (file == "bootstrap/bootstrap.go" || strings.HasPrefix(file, "bootstrap/preflight/")) {
			return ""
		}
		if imp == module+"/daemon" || strings.HasPrefix(imp, module+"/daemon/") {
			return "bootstrap is below the daemon: it imports no daemon package (bootstrap.go and bootstrap/preflight may use the wire types of daemon/api)"
		}
		return ""
	},
	// What runs for the daemon's life (the deployment controller, the OpenStack client)
	// is the daemon's: nothing under bootstrap/, tests included, imports it.
	func(file string, test bool, imp string) string {
		if !strings.HasPrefix(file, "bootstrap/") {
			return ""
		}
		for _, up := range []string{"/daemon/deploy", "/daemon/openstack"} {
			if imp == module+up || strings.HasPrefix(imp, module+up+"/") {
				return "bootstrap prepares a host: nothing under it imports daemon/deploy or daemon/openstack"
			}
		}
		return ""
	},
	// The atomic-write helper is bootstrap/fsutil; daemon/fsutil is gone, and no low layer
	// (tests included) reaches up for it.
	func(file string, test bool, imp string) string {
		if imp != module+"/daemon/fsutil" {
			return ""
		}
		for _, low := range []string{"bootstrap/", "netsetup/", "hypervisor/", "charts/"} {
			if strings.HasPrefix(file, low) {
				return "daemon/fsutil is gone: the atomic-write helper is bootstrap/fsutil"
			}
		}
		return ""
	},
	// The host packages and the charts are the bottom layer (their tests may render the
	// charts with the real deploy code).
	func(file string, test bool, imp string) string {
		if test {
			return ""
		}
		for _, low := range []string{"netsetup/", "hypervisor/", "charts/"} {
			if strings.HasPrefix(file, low) && (strings.HasPrefix(imp, module+"/daemon") || strings.HasPrefix(imp, module+"/bootstrap")) {
				return low + " must not import the daemon or bootstrap layers"
			}
		}
		return ""
	},
	// Only osd daemon wires the composition root.
	func(file string, test bool, imp string) string {
		if imp == module+"/daemon" && file != "cmd/osd/daemon.go" {
			return "only the osd daemon command imports the daemon's composition root"
		}
		return ""
	},
	// k3s only behind daemon/k3s.
	func(file string, test bool, imp string) string {
		if strings.HasPrefix(imp, "github.com/k3s-io/k3s") && !strings.HasPrefix(file, "daemon/k3s/") {
			return "only daemon/k3s imports k3s"
		}
		return ""
	},
	// Resources do not import each other (their tests may wire the real siblings they are
	// given, as the composition root does).
	func(file string, test bool, imp string) string {
		from, to := daemonPart(path.Dir(file)), daemonPart(strings.TrimPrefix(imp, module+"/"))
		if test || !strings.HasPrefix(imp, module+"/daemon/") || from == to || !slices.Contains(daemonResources, from) || !slices.Contains(daemonResources, to) {
			return ""
		}
		if _, ok := resourceImports[from+">"+to]; ok {
			return ""
		}
		return "daemon/" + from + " and daemon/" + to + " are resources: one asks the other through an interface it defines (given by the composition root), or what both need moves to a library"
	},
	// Libraries import no resource.
	func(file string, test bool, imp string) string {
		from, to := daemonPart(path.Dir(file)), daemonPart(strings.TrimPrefix(imp, module+"/"))
		if strings.HasPrefix(imp, module+"/daemon/") && slices.Contains(daemonLibraries, from) && slices.Contains(daemonResources, to) {
			return "daemon/" + from + " is a library and daemon/" + to + " a resource: a library imports no resource"
		}
		return ""
	},
	// Every daemon package is a resource or a library.
	func(file string, test bool, imp string) string {
		for _, part := range []string{daemonPart(path.Dir(file)), daemonPart(strings.TrimPrefix(imp, module+"/"))} {
			if part != "" && part != "root" && !slices.Contains(daemonResources, part) && !slices.Contains(daemonLibraries, part) {
				return "daemon/" + part + " is neither a resource nor a library: add it to daemonResources or daemonLibraries"
			}
		}
		return ""
	},
	// daemon/api, the wire types, is a leaf.
	func(file string, test bool, imp string) string {
		if strings.HasPrefix(file, "daemon/api/") && strings.HasPrefix(imp, module+"/") {
			return "daemon/api is a leaf: it imports no osd package"
		}
		return ""
	},
	// Outside daemon/, only cmd/osd, test/ and the exceptions of daemonOutside import a
	// daemon package.
	func(file string, test bool, imp string) string {
		if !strings.HasPrefix(imp+"/", module+"/daemon/") || strings.HasPrefix(file, "daemon/") ||
			strings.HasPrefix(file, "cmd/osd/") || strings.HasPrefix(file, "test/") {
			return ""
		}
		rel := strings.TrimPrefix(imp, module+"/")
		for _, e := range daemonOutside {
			if strings.HasPrefix(file, e.under) && (test || !e.testsOnly) && (rel == e.imp || strings.HasSuffix(e.imp, "/") && strings.HasPrefix(rel, e.imp)) {
				return ""
			}
		}
		return "outside daemon/, only cmd/osd and test/ import daemon packages (and what daemonOutside lists)"
	},
	// Helm only behind daemon/deploy.
	func(file string, test bool, imp string) string {
		if strings.HasPrefix(imp, "helm.sh/helm") && !strings.HasPrefix(file, "daemon/deploy/") {
			return "only daemon/deploy imports Helm"
		}
		return ""
	},
}

// importViolations checks files (path -> imports) against importRules (pure).
func importViolations(files map[string][]string) []string {
	var out []string
	for file, imps := range files {
		test := strings.HasSuffix(file, "_test.go")
		for _, imp := range imps {
			for _, rule := range importRules {
				if why := rule(file, test, imp); why != "" {
					out = append(out, file+" imports "+imp+": "+why)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// treeImports reads the imports of every Go file of the repository at root.
func treeImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	files := map[string][]string{}
	fset := token.NewFileSet()
	for rel, src := range treeSources(t, root) {
		f, err := parser.ParseFile(fset, rel, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, is := range f.Imports {
			files[rel] = append(files[rel], strings.Trim(is.Path.Value, `"`))
		}
	}
	return files
}

// TestImportRules holds the tree to its layering: the CLI, the low layers, bootstrap
// below the daemon (and below what runs for the daemon's life), the composition root, the
// daemon's resources and libraries, k3s and Helm each imported only where they belong.
func TestImportRules(t *testing.T) {
	files := treeImports(t, "..")
	if len(files) < 100 {
		t.Fatalf("read %d Go files, want the whole tree", len(files))
	}
	for _, v := range importViolations(files) {
		t.Error(v)
	}
	for _, f := range cliInProcess {
		if _, err := os.Stat(filepath.Join("..", f)); err != nil {
			t.Errorf("in-process CLI file %s: %v (update cliInProcess)", f, err)
		}
	}
	for f, imp := range cliHostWrites {
		if !slices.Contains(files[f], imp) {
			t.Errorf("%s does not import %s any more: drop it from cliHostWrites", f, imp)
		}
	}
	for f := range files {
		if p := daemonPart(path.Dir(f)); p != "" && p != "root" && !slices.Contains(daemonResources, p) && !slices.Contains(daemonLibraries, p) {
			t.Errorf("%s: daemon/%s is neither a resource nor a library: add it to daemonResources or daemonLibraries", f, p)
		}
	}
	for _, p := range append(slices.Clone(daemonResources), daemonLibraries...) {
		if _, err := os.Stat(filepath.Join("..", "daemon", p)); err != nil && p != "deploy" && p != "openstack" {
			t.Errorf("daemon/%s: %v (update daemonResources or daemonLibraries)", p, err)
		}
	}
	for _, e := range daemonOutside {
		if _, err := os.Stat(filepath.Join("..", strings.TrimSuffix(e.imp, "/"))); err != nil {
			continue // not moved there yet
		}
		used := false
		for f, imps := range files {
			for _, imp := range imps {
				rel := strings.TrimPrefix(imp, module+"/")
				used = used || strings.HasPrefix(f, e.under) && (rel == e.imp || strings.HasSuffix(e.imp, "/") && strings.HasPrefix(rel, e.imp))
			}
		}
		if !used {
			t.Errorf("nothing under %s imports %s any more: drop it from daemonOutside", e.under, e.imp)
		}
	}
}

// TestImportRulesCatchBadImports feeds the rules deliberately bad imports: each is caught.
func TestImportRulesCatchBadImports(t *testing.T) {
	for _, c := range []struct{ file, imp string }{
		{"cmd/osd/status.go", module + "/daemon/deploy"},
		{"cmd/osd/launch.go", module + "/daemon"},
		{"cmd/osd/cluster.go", module + "/daemon/cluster"},
		{"netsetup/nat.go", module + "/daemon/store"},
		{"hypervisor/kvm.go", module + "/bootstrap/preflight"},
		{"charts/charts.go", module + "/daemon/api"},
		{"daemon/join/join.go", module + "/daemon"},
		{"daemon/node/node.go", "github.com/k3s-io/k3s/pkg/agent"},
		{"daemon/deployment/deployment.go", "helm.sh/helm/v3/pkg/action"},
		{"bootstrap/images/archive.go", module + "/daemon/fsutil"},
		{"bootstrap/images/archive_test.go", module + "/daemon/fsutil"},
		{"netsetup/host_test.go", module + "/daemon/fsutil"},
		{"hypervisor/kvm.go", module + "/daemon/fsutil"},
		{"charts/charts.go", module + "/daemon/fsutil"},
		{"bootstrap/bootstrap.go", module + "/daemon/deploy"},
		{"bootstrap/images/catalog.go", module + "/daemon/deploy"},
		{"bootstrap/images/guest/build.go", module + "/daemon/openstack"},
		{"bootstrap/bootstrap_test.go", module + "/daemon/deploy/helmclient"},
		{"bootstrap/graph_test.go", module + "/daemon/openstack"},
		{"bootstrap/images/oci/pack.go", module + "/daemon/api"},
		{"bootstrap/fsutil/fsutil.go", module + "/daemon/api"},
		{"bootstrap/images/builder.go", "helm.sh/helm/v3/pkg/action"},
		{"bootstrap/bootstrap.go", module + "/daemon"},
		{"bootstrap/preflight/decide.go", module + "/daemon/client"},
		{"cmd/osd/service.go", module + "/daemon/store"},
		{"cmd/osd/status.go", module + "/bootstrap/fsutil"},
	} {
		if v := importViolations(map[string][]string{c.file: {c.imp}}); len(v) == 0 {
			t.Errorf("%s importing %s passes the import rules, want it caught", c.file, c.imp)
		}
	}
	for _, c := range []struct{ file, imp string }{
		{"cmd/osd/status.go", module + "/daemon/api"},
		{"cmd/osd/status_test.go", module + "/daemon/deploy"},
		{"cmd/osd/daemon.go", module + "/daemon"},
		{"daemon/k3s/server.go", "github.com/k3s-io/k3s/pkg/agent"},
		{"daemon/deploy/helmclient/client.go", "helm.sh/helm/v3/pkg/action"},
		{"daemon/deploy/types.go", module + "/daemon/api"},
		{"bootstrap/bootstrap_test.go", module + "/daemon/store"},
		{"bootstrap/bootstrap.go", module + "/daemon/api"},
		{"bootstrap/preflight/decide.go", module + "/daemon/api"},
		{"daemon/deployment/cloud.go", module + "/daemon/openstack"},
		{"daemon/launch/launch.go", module + "/daemon/openstack"},
		{"daemon/openstack/launch.go", module + "/bootstrap/images/guest"},
		{"charts/charts_test.go", module + "/daemon/deploy"},
		{"bootstrap/images/archive.go", module + "/bootstrap/fsutil"},
		{"daemon/store/schema.go", module + "/bootstrap/fsutil"},
		{"cmd/osd/service.go", module + "/bootstrap/fsutil"},
		{"cmd/osd/service.go", module + "/daemon/client"},
		{"daemon/join/join.go", module + "/daemon/hostplan"},
		{"daemon/members/members.go", module + "/daemon/cluster"},
		{"daemon/converge/converge.go", module + "/daemon/state"},
		{"daemon/deployment/storage_test.go", module + "/daemon/storage"},
		{"daemon/hostplan/firewall.go", module + "/daemon/deploy"},
		{"daemon/deployment/cloud.go", module + "/daemon/openstack"},
		{"daemon/node/node.go", module + "/daemon/cluster"},
		{"daemon/deploy/helmclient/client.go", module + "/daemon/deploy"},
		{"daemon/daemon.go", module + "/daemon/members"},
		{"daemon/api/init.go", "time"},
		{"bootstrap/preflight/decide.go", module + "/daemon/api"},
		{"bootstrap/graph_test.go", module + "/daemon/store"},
		{"charts/apis_test.go", module + "/daemon/deploy"},
		{"charts/apis_test.go", module + "/daemon/deploy/helmclient"},
		{"charts/ceph_image_test.go", module + "/daemon/storage"},
		{"test/cluster_test.go", module + "/daemon/cluster"},
		{"cmd/osd/reset.go", module + "/daemon/reset"},
	} {
		if v := importViolations(map[string][]string{c.file: {c.imp}}); len(v) != 0 {
			t.Errorf("%s importing %s is refused: %v, want it allowed", c.file, c.imp, v)
		}
	}
}

// TestImportRulesCatchDaemonLayering feeds the daemon's layering rules deliberately bad
// imports: each is caught by the rule meant for it (its reason says so).
func TestImportRulesCatchDaemonLayering(t *testing.T) {
	const (
		resources = "are resources"
		library   = "a library imports no resource"
		unknown   = "neither a resource nor a library"
		leaf      = "daemon/api is a leaf"
		outside   = "outside daemon/"
	)
	for _, c := range []struct{ file, imp, want string }{
		{"daemon/join/join.go", module + "/daemon/converge", resources},
		{"daemon/deployment/spec.go", module + "/daemon/images", resources},
		{"daemon/members/describe.go", module + "/daemon/deployment", resources},
		{"daemon/converge/converge.go", module + "/daemon/storage", resources},
		{"daemon/reset/reset.go", module + "/daemon/converge", resources},
		{"daemon/hostplan/plan.go", module + "/daemon/storage", library},
		{"daemon/node/node.go", module + "/daemon/members", library},
		{"daemon/cluster/join.go", module + "/daemon/join", library},
		{"daemon/cluster/join_test.go", module + "/daemon/join", library},
		{"daemon/deploy/controller.go", module + "/daemon/images", library},
		{"daemon/openstack/launch.go", module + "/daemon/launch", library},
		{"daemon/newthing/thing.go", module + "/daemon/store", unknown},
		{"daemon/join/join.go", module + "/daemon/newthing", unknown},
		{"daemon/api/init.go", module + "/daemon/rest", leaf},
		{"daemon/api/api_test.go", module + "/bootstrap", leaf},
		{"bootstrap/images/archive.go", module + "/daemon/store", outside},
		{"bootstrap/bootstrap_test.go", module + "/daemon/cluster", outside},
		{"hypervisor/kvm_test.go", module + "/daemon/store", outside},
		{"netsetup/ovnsb/client_test.go", module + "/daemon/api", outside},
		{"charts/charts_test.go", module + "/daemon/storage", outside},
		{"charts/charts.go", module + "/daemon/deploy", outside},
	} {
		v := importViolations(map[string][]string{c.file: {c.imp}})
		if !slices.ContainsFunc(v, func(s string) bool { return strings.Contains(s, c.want) }) {
			t.Errorf("%s importing %s: violations %v, want one saying %q", c.file, c.imp, v, c.want)
		}
	}
}
