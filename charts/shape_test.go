package charts

import (
	"io/fs"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// workloadKind matches a manifest line that declares a workload or a Service by hand.
var workloadKind = regexp.MustCompile(`(?m)^\s*kind:\s*["']?(Deployment|StatefulSet|DaemonSet|ReplicaSet|Pod|Job|CronJob|Service)["']?\s*$`)

// workloadAPI matches the API groups only workloads use (apps/v1, batch/v1), in YAML or in
// a dict built in a template.
var workloadAPI = regexp.MustCompile(`\b(apps|batch)/v1\b`)

// dictKind matches a Service or Job built as a dict ("kind" "Service"); the kinds
// osd-lib.workload takes as its "kind" argument (Deployment, StatefulSet, DaemonSet) are
// caught by their apiVersion instead.
var dictKind = regexp.MustCompile(`"kind"\s+"(Service|Job|CronJob|Pod|ReplicaSet)"`)

// pythonLine matches a line of a Python program (an import statement at a line's start).
var pythonLine = regexp.MustCompile(`(?m)^\s*(import [A-Za-z_].*|from [A-Za-z_.]+ import .*)$`)

// inlinePythonAllowed are the templates that may hold Python, each with its reason.
var inlinePythonAllowed = map[string]string{
	// osd-lib.mallocTrim is put before a service's program with the chart's interval in
	// it; TestMallocTrim runs it in Python.
	"osd-lib/templates/_python.tpl": "the malloc_trim prelude, parameterized by mallocTrimSeconds",
}

// chartTemplates is every template file of the embedded charts but the library's: path to
// text.
func chartTemplates(t *testing.T, lib bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := fs.WalkDir(FS, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		parts := strings.Split(p, "/")
		if d.IsDir() || len(parts) < 3 || parts[1] != "templates" || (parts[0] == Library && !lib) {
			return nil
		}
		b, err := fs.ReadFile(FS, p)
		if err != nil {
			return err
		}
		out[p] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no chart templates in charts.FS")
	}
	return out
}

// TestWorkloadsThroughLibrary: no chart writes a Deployment, StatefulSet, DaemonSet, Job or
// Service itself; each goes through osd-lib.workload, osd-lib.job or osd-lib.service, which
// hold the labels and the immutable selectors every chart shares. Objects that are not
// workloads (ConfigMaps, Secrets, RBAC: coredns' ServiceAccount and ClusterRole) are not
// matched, so no allow-list is needed.
func TestWorkloadsThroughLibrary(t *testing.T) {
	templates := chartTemplates(t, false)
	names := make([]string, 0, len(templates))
	for p := range templates {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		text := templates[p]
		for _, re := range []*regexp.Regexp{workloadKind, workloadAPI, dictKind} {
			if m := re.FindString(text); m != "" {
				t.Errorf("%s: %q: write workloads and Services with osd-lib.workload, osd-lib.job or osd-lib.service", p, strings.TrimSpace(m))
			}
		}
	}
}

// TestNoInlinePython: the charts' Python programs live in files/*.py, where
// testdata/python's unit tests import them, not in templates.
func TestNoInlinePython(t *testing.T) {
	for p, text := range chartTemplates(t, true) {
		if m := pythonLine.FindString(text); m != "" && inlinePythonAllowed[p] == "" {
			t.Errorf("%s: %q: put the program in the chart's files/ and test it in testdata/python", p, strings.TrimSpace(m))
		}
	}
	for p := range inlinePythonAllowed {
		if _, err := fs.Stat(FS, p); err != nil {
			t.Errorf("inlinePythonAllowed names %s: %v", p, err)
		}
	}
}

// TestRenderedWorkloadShape: every Deployment, StatefulSet and DaemonSet of every chart in
// every snapshot variant selects its pods by exactly osd-lib.selectorLabels (instance and
// component: selectors are immutable, a change breaks upgrades) and labels them with
// osd-lib.labels; every Service selects by the same two labels.
func TestRenderedWorkloadShape(t *testing.T) {
	selectorKeys := []string{"app.kubernetes.io/component", "app.kubernetes.io/instance"}
	labelKeys := []string{"app.kubernetes.io/component", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/name", "app.kubernetes.io/part-of"}
	keys := func(m any) []string {
		mm, _ := m.(map[string]any)
		out := make([]string, 0, len(mm))
		for k := range mm {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	get := func(doc any, fields ...string) any {
		for _, f := range fields {
			m, _ := doc.(map[string]any)
			doc = m[f]
		}
		return doc
	}
	workloads := 0
	for file, docs := range snapshotRender(t) {
		for name, doc := range docs {
			kind, _, _ := strings.Cut(name, "/")
			switch kind {
			case "Deployment", "StatefulSet", "DaemonSet":
				workloads++
				sel := get(doc, "spec", "selector", "matchLabels")
				if got := keys(sel); !reflect.DeepEqual(got, selectorKeys) {
					t.Errorf("%s %s: selector labels %v, want %v", file, name, got, selectorKeys)
				}
				pod := get(doc, "spec", "template", "metadata", "labels")
				if got := keys(pod); !reflect.DeepEqual(got, labelKeys) {
					t.Errorf("%s %s: pod labels %v, want %v", file, name, got, labelKeys)
				}
				for _, k := range selectorKeys {
					if get(pod, k) != get(sel, k) {
						t.Errorf("%s %s: pod label %s = %v, selector %v", file, name, k, get(pod, k), get(sel, k))
					}
				}
			case "Service":
				if got := keys(get(doc, "spec", "selector")); !reflect.DeepEqual(got, selectorKeys) {
					t.Errorf("%s %s: selector labels %v, want %v", file, name, got, selectorKeys)
				}
			}
		}
	}
	if workloads == 0 {
		t.Fatal("no workloads rendered")
	}
}
