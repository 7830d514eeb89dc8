package deploy

import (
	"bufio"
	"context"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func schemaGR() schema.GroupResource { return schema.GroupResource{Group: Group, Resource: Resource} }

// maxLogFetches bounds the log requests of one pass.
const maxLogFetches = 8

// observeHealth lists the workloads of every desired release and computes their health and
// each release's readiness (every workload ready, at least one workload).
func (c *Controller) observeHealth(ctx context.Context, cat Catalog, desired map[string]string) (map[string]WorkloadHealth, map[string]bool, error) {
	namespaces := map[string]bool{}
	for name := range desired {
		svc, _ := cat.Service(name)
		namespaces[svc.Namespace] = true
	}
	health := map[string]WorkloadHealth{}
	count := map[string]int{}
	ready := map[string]bool{}
	for name := range desired {
		ready[name] = true
	}
	fetched := 0
	for ns := range namespaces {
		pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("list pods in %s: %w", ns, err)
		}
		podsFor := func(sel *metav1.LabelSelector) []corev1.Pod {
			s, err := metav1.LabelSelectorAsSelector(sel)
			if err != nil || s.Empty() {
				return nil
			}
			var out []corev1.Pod
			for _, p := range pods.Items {
				if s.Matches(labels.Set(p.Labels)) {
					out = append(out, p)
				}
			}
			return out
		}
		logsFor := func(ps []corev1.Pod) Logs {
			logs := Logs{}
			for _, ref := range LogTargets(ps) {
				if fetched >= maxLogFetches {
					break
				}
				fetched++
				if line := c.lastLogLine(ctx, ns, ref); line != "" {
					logs[ref] = line
				}
			}
			return logs
		}
		owner := func(m metav1.ObjectMeta) (string, bool) {
			rel := m.Annotations[annoReleaseName]
			_, want := desired[rel]
			if !want || m.Annotations[annoReleaseNamespace] != ns {
				return "", false
			}
			if svc, _ := cat.Service(rel); svc.Namespace != ns {
				return "", false
			}
			return rel, true
		}
		add := func(rel string, h WorkloadHealth) {
			h.Release = rel
			health[h.Kind+"/"+h.Namespace+"/"+h.Name] = h
			count[rel]++
			if h.Reason != "" {
				ready[rel] = false
			}
		}

		dl, err := c.Kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("list deployments in %s: %w", ns, err)
		}
		for i := range dl.Items {
			d := &dl.Items[i]
			if rel, ok := owner(d.ObjectMeta); ok {
				ps := podsFor(d.Spec.Selector)
				h := DeploymentHealth(d, ps, nil)
				if h.Reason != "" {
					h = DeploymentHealth(d, ps, logsFor(ps))
				}
				add(rel, h)
			}
		}
		sl, err := c.Kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("list statefulsets in %s: %w", ns, err)
		}
		for i := range sl.Items {
			s := &sl.Items[i]
			if rel, ok := owner(s.ObjectMeta); ok {
				ps := podsFor(s.Spec.Selector)
				h := StatefulSetHealth(s, ps, nil)
				if h.Reason != "" {
					h = StatefulSetHealth(s, ps, logsFor(ps))
				}
				add(rel, h)
			}
		}
		dsl, err := c.Kube.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("list daemonsets in %s: %w", ns, err)
		}
		for i := range dsl.Items {
			ds := &dsl.Items[i]
			if rel, ok := owner(ds.ObjectMeta); ok {
				ps := podsFor(ds.Spec.Selector)
				h := DaemonSetHealth(ds, ps, nil)
				if h.Reason != "" {
					h = DaemonSetHealth(ds, ps, logsFor(ps))
				}
				add(rel, h)
			}
		}
		jl, err := c.Kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, nil, fmt.Errorf("list jobs in %s: %w", ns, err)
		}
		for i := range jl.Items {
			j := &jl.Items[i]
			if rel, ok := owner(j.ObjectMeta); ok {
				ps := podsFor(j.Spec.Selector)
				h := JobHealth(j, ps, nil)
				if h.Reason != "" {
					h = JobHealth(j, ps, logsFor(ps))
				}
				add(rel, h)
			}
		}
	}
	for name := range desired {
		if count[name] == 0 {
			ready[name] = false
		}
	}
	return health, ready, nil
}

func (c *Controller) lastLogLine(ctx context.Context, ns string, ref ContainerRef) string {
	tail := int64(20)
	b, err := c.Kube.CoreV1().Pods(ns).GetLogs(ref.Pod, &corev1.PodLogOptions{Container: ref.Container, Previous: ref.Previous, TailLines: &tail}).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return ReasonLine(string(b))
}

var (
	ansiEscape = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
	// What SQLAlchemy prints after the exception line.
	sqlTrailer = regexp.MustCompile(`^(\(Background on this error at: [^)]*\)|\[SQL: .*|\[parameters: .*)$`)
	// MySQL's error 1146 (ER_NO_SUCH_TABLE).
	missingTable = regexp.MustCompile(`\(1146, "Table '[^']+' doesn't exist"\)`)
	// oslo.log's prefix: "2026-11-21 15:24:26.759 1 ERROR neutron " (date, time, pid, level, logger).
	osloPrefix = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \d+ (CRITICAL|ERROR|WARNING|INFO|DEBUG|TRACE) \S+( \[[^\]]*\])? ?`)
)

// ReasonLine picks the line of a log tail that says why a container stopped: the last line
// with text once terminal colour codes and oslo.log's date/pid/level/logger prefix are gone
// (a Python traceback ends with the exception; SQLAlchemy's [SQL: ...], [parameters: ...]
// and "Background on this error" lines after it are skipped), at most 300 bytes. A missing
// table says that the database is not migrated yet.
func ReasonLine(log string) string {
	last := ""
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		l := ansiEscape.ReplaceAllString(sc.Text(), "")
		l = strings.TrimSpace(osloPrefix.ReplaceAllString(strings.TrimSpace(l), ""))
		if l != "" && !sqlTrailer.MatchString(l) {
			last = l
		}
	}
	if len(last) > 300 {
		last = last[:300] + "..."
	}
	if missingTable.MatchString(last) {
		last += " (the database schema is not there yet: the service's init Job migrates it)"
	}
	return last
}
