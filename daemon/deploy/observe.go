package deploy

import (
	"bufio"
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
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
func (c *Controller) observeHealth(ctx context.Context, cat Catalog, desired map[string]string) (map[string]WorkloadHealth, map[string]bool, map[string]*ReleaseMarks, error) {
	hs := &healthScan{c: c, cat: cat, desired: desired,
		health: map[string]WorkloadHealth{}, count: map[string]int{}, ready: map[string]bool{}, marks: map[string]*ReleaseMarks{}}
	if !c.Since.IsZero() {
		stale, err := c.staleNodes(ctx)
		if err != nil {
			return nil, nil, nil, err
		}
		hs.stale = stale
	}
	namespaces := map[string]bool{}
	for name := range desired {
		svc, _ := cat.Service(name)
		namespaces[svc.Namespace] = true
		hs.ready[name] = true
	}
	for ns := range namespaces {
		if err := hs.scan(ctx, ns); err != nil {
			return nil, nil, nil, err
		}
	}
	for name := range desired {
		if hs.count[name] == 0 {
			hs.ready[name] = false // nothing of it runs yet
		}
	}
	return hs.health, hs.ready, hs.marks, nil
}

// healthScan is one pass over the workloads of the desired releases.
type healthScan struct {
	c       *Controller
	cat     Catalog
	desired map[string]string
	health  map[string]WorkloadHealth
	count   map[string]int           // workloads seen per release
	ready   map[string]bool          // per release
	marks   map[string]*ReleaseMarks // per release: its pods' and Jobs' latest times
	fetched int                      // log lines fetched in this pass (at most maxLogFetches)
	stale   map[string]string        // nodes that have not reported since Since -> why
}

// scan looks at every workload in ns that belongs to a desired release.
func (hs *healthScan) scan(ctx context.Context, ns string) error {
	kube := hs.c.Kube
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods in %s: %w", ns, err)
	}
	n := &nsScan{healthScan: hs, ns: ns, pods: pods.Items}
	dl, err := kube.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list deployments in %s: %w", ns, err)
	}
	for i := range dl.Items {
		d := &dl.Items[i]
		n.consider(ctx, d.ObjectMeta, d.Spec.Selector, nil, func(ps []corev1.Pod, l Logs) WorkloadHealth { return DeploymentHealth(d, ps, l) })
	}
	sl, err := kube.AppsV1().StatefulSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list statefulsets in %s: %w", ns, err)
	}
	for i := range sl.Items {
		s := &sl.Items[i]
		n.consider(ctx, s.ObjectMeta, s.Spec.Selector, nil, func(ps []corev1.Pod, l Logs) WorkloadHealth { return StatefulSetHealth(s, ps, l) })
	}
	dsl, err := kube.AppsV1().DaemonSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list daemonsets in %s: %w", ns, err)
	}
	for i := range dsl.Items {
		ds := &dsl.Items[i]
		n.consider(ctx, ds.ObjectMeta, ds.Spec.Selector, nil, func(ps []corev1.Pod, l Logs) WorkloadHealth { return DaemonSetHealth(ds, ps, l) })
	}
	jl, err := kube.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list jobs in %s: %w", ns, err)
	}
	for i := range jl.Items {
		j := &jl.Items[i]
		n.consider(ctx, j.ObjectMeta, j.Spec.Selector, j, func(ps []corev1.Pod, l Logs) WorkloadHealth { return JobHealth(j, ps, l) })
	}
	return nil
}

// nsScan is the part of a health scan in one namespace.
type nsScan struct {
	*healthScan
	ns   string
	pods []corev1.Pod
}

// consider records the health of one workload if it belongs to a desired release; the
// last log lines of its failing containers are read only when it is not healthy.
func (n *nsScan) consider(ctx context.Context, meta metav1.ObjectMeta, sel *metav1.LabelSelector, job *batchv1.Job, health func([]corev1.Pod, Logs) WorkloadHealth) {
	rel, ok := n.owner(meta)
	if !ok {
		return
	}
	ps := n.podsFor(sel)
	if n.marks[rel] == nil {
		n.marks[rel] = &ReleaseMarks{}
	}
	addMarks(n.marks[rel], ps, job)
	h := health(ps, nil)
	if h.Reason != "" {
		h = health(ps, n.logsFor(ctx, ps))
	}
	if why := StaleReason(ps, n.stale); why != "" && !h.Failed {
		h.Reason = why
	}
	h.Release = rel
	n.health[h.Kind+"/"+h.Namespace+"/"+h.Name] = h
	n.count[rel]++
	if h.Reason != "" {
		n.ready[rel] = false
	}
}

// owner is the desired release a workload belongs to, by Helm's annotations.
func (n *nsScan) owner(m metav1.ObjectMeta) (string, bool) {
	rel := m.Annotations[annoReleaseName]
	_, want := n.desired[rel]
	if !want || m.Annotations[annoReleaseNamespace] != n.ns {
		return "", false
	}
	if svc, _ := n.cat.Service(rel); svc.Namespace != n.ns {
		return "", false
	}
	return rel, true
}

func (n *nsScan) podsFor(sel *metav1.LabelSelector) []corev1.Pod {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() {
		return nil
	}
	var out []corev1.Pod
	for _, p := range n.pods {
		if s.Matches(labels.Set(p.Labels)) {
			out = append(out, p)
		}
	}
	return out
}

func (n *nsScan) logsFor(ctx context.Context, ps []corev1.Pod) Logs {
	logs := Logs{}
	for _, ref := range LogTargets(ps) {
		if n.fetched >= maxLogFetches {
			break
		}
		n.fetched++
		if tail := n.c.logTail(ctx, n.ns, ref); tail != "" {
			logs[ref] = tail
		}
	}
	return logs
}

// logTail is the end of a container's log: enough lines to hold the error a database
// printed before its shutdown noise (RabbitMQ's crash reports run to 150 lines), bounded.
func (c *Controller) logTail(ctx context.Context, ns string, ref ContainerRef) string {
	lines, limit := int64(200), int64(256*1024) // the limit keeps the first bytes of the tail
	b, err := c.Kube.CoreV1().Pods(ns).GetLogs(ref.Pod, &corev1.PodLogOptions{Container: ref.Container, Previous: ref.Previous, TailLines: &lines, LimitBytes: &limit}).DoRaw(ctx)
	if err != nil {
		return ""
	}
	return string(b)
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

// staleNodes are the nodes whose kubelet has not reported since c.Since (a restart, a
// power cut): what the cluster recorded of their pods is from before, not true now. A
// node is fresh once its kubelet renewed its lease after Since and reports Ready.
func (c *Controller) staleNodes(ctx context.Context) (map[string]string, error) {
	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	leases, err := c.Kube.CoordinationV1().Leases("kube-node-lease").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list node leases: %w", err)
	}
	renewed := map[string]time.Time{}
	for _, l := range leases.Items {
		if l.Spec.RenewTime != nil {
			renewed[l.Name] = l.Spec.RenewTime.Time
		}
	}
	return StaleNodes(nodes.Items, renewed, c.Since), nil
}

// StaleNodes names the nodes not known to be up now (pure): not Ready, or whose lease was
// last renewed before since, each with the reason.
func StaleNodes(nodes []corev1.Node, renewed map[string]time.Time, since time.Time) map[string]string {
	out := map[string]string{}
	for _, n := range nodes {
		ready := false
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				ready = c.Status == corev1.ConditionTrue
			}
		}
		switch r, ok := renewed[n.Name]; {
		case !ok || r.Before(since.Truncate(time.Second)):
			out[n.Name] = fmt.Sprintf("node %s has not reported since %s: its pods' state is from before", n.Name, since.Format(time.RFC3339))
		case !ready:
			out[n.Name] = fmt.Sprintf("node %s is not ready", n.Name)
		}
	}
	return out
}

// StaleReason is why a workload's recorded state cannot be trusted (pure): one of its pods
// runs on a stale node ("" when none does).
func StaleReason(pods []corev1.Pod, stale map[string]string) string {
	for _, p := range pods {
		if why, ok := stale[p.Spec.NodeName]; ok && p.Spec.NodeName != "" {
			return "pod " + p.Name + ": " + why
		}
	}
	return ""
}
