package deploy

import (
	"fmt"
	"sort"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// ContainerRef names one container's log: Previous is the last terminated instance.
type ContainerRef struct {
	Pod       string
	Container string
	Previous  bool
}

// Logs holds the last lines of some containers' logs.
type Logs map[ContainerRef]string

// LogTargets returns the containers whose last log lines explain a failure: those that
// terminated with an error (now or in their previous instance) or are crash-looping, even
// with exit code 0 (rabbitmq-server exits 0 when its boot fails).
func LogTargets(pods []corev1.Pod) []ContainerRef {
	var out []ContainerRef
	for _, p := range pods {
		for _, cs := range allStatuses(p) {
			last := cs.LastTerminationState.Terminated
			switch {
			case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
				out = append(out, ContainerRef{Pod: p.Name, Container: cs.Name})
			case cs.State.Waiting != nil && last != nil && (last.ExitCode != 0 || cs.State.Waiting.Reason == "CrashLoopBackOff"):
				out = append(out, ContainerRef{Pod: p.Name, Container: cs.Name, Previous: true})
			}
		}
	}
	return out
}

func allStatuses(p corev1.Pod) []corev1.ContainerStatus {
	out := append([]corev1.ContainerStatus(nil), p.Status.InitContainerStatuses...)
	return append(out, p.Status.ContainerStatuses...)
}

// PodsReason explains why pods are not ready, most telling problem first: unschedulable,
// image missing, a container or init step failing (with its last log line), a container
// waiting for another reason, a readiness probe failing. Empty when nothing is wrong.
// Pods are considered newest first so a replaced pod does not hide the current one.
func PodsReason(pods []corev1.Pod, logs Logs) string {
	sorted := append([]corev1.Pod(nil), pods...)
	sort.SliceStable(sorted, func(i, j int) bool {
		return sorted[j].CreationTimestamp.Before(&sorted[i].CreationTimestamp)
	})
	best, bestRank := "", 0
	consider := func(rank int, reason string) {
		if rank > bestRank {
			best, bestRank = reason, rank
		}
	}
	for _, p := range sorted {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				consider(70, fmt.Sprintf("pod %s unschedulable: %s", p.Name, c.Message))
			}
		}
		initNames := map[string]bool{}
		for _, cs := range p.Status.InitContainerStatuses {
			initNames[cs.Name] = true
		}
		for _, cs := range allStatuses(p) {
			what := "container " + cs.Name
			if initNames[cs.Name] {
				what = "init step " + cs.Name
			}
			if w := cs.State.Waiting; w != nil {
				switch w.Reason {
				case "ErrImageNeverPull", "ImagePullBackOff", "ErrImagePull", "InvalidImageName":
					consider(60, fmt.Sprintf("pod %s: image %s not available (%s)", p.Name, cs.Image, w.Reason))
				case "CrashLoopBackOff":
					consider(50, fmt.Sprintf("pod %s: %s crash-looping%s%s", p.Name, what,
						exitText(cs.LastTerminationState.Terminated), logText(p, logs, ContainerRef{p.Name, cs.Name, true})))
				case "CreateContainerConfigError", "CreateContainerError", "RunContainerError":
					consider(55, fmt.Sprintf("pod %s: %s: %s: %s", p.Name, what, w.Reason, w.Message))
				case "", "PodInitializing", "ContainerCreating":
				default:
					consider(20, fmt.Sprintf("pod %s: %s waiting: %s", p.Name, what, w.Reason))
				}
			}
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				consider(45, fmt.Sprintf("pod %s: %s failed%s%s", p.Name, what, exitText(t), logText(p, logs, ContainerRef{p.Name, cs.Name, false})))
			}
			if cs.State.Running != nil && !cs.Ready && !initNames[cs.Name] {
				if cs.Started != nil && !*cs.Started {
					consider(10, fmt.Sprintf("pod %s: container %s starting (startup probe not yet passing)", p.Name, cs.Name))
				} else {
					consider(15, fmt.Sprintf("pod %s: container %s not ready (readiness probe failing)", p.Name, cs.Name))
				}
			}
		}
		if p.Status.Phase == corev1.PodPending && bestRank == 0 {
			consider(5, fmt.Sprintf("pod %s pending", p.Name))
		}
	}
	return best
}

func exitText(t *corev1.ContainerStateTerminated) string {
	if t == nil {
		return ""
	}
	s := fmt.Sprintf(" (exit code %d", t.ExitCode)
	if t.Reason != "" && t.Reason != "Error" {
		s += ", " + t.Reason
	}
	return s + ")"
}

// logText is ": " and the line of a failed container's log that says why it stopped, or,
// for a known start failure of a stateful service (Diagnose), the line that shows it and
// what to do.
func logText(p corev1.Pod, logs Logs, ref ContainerRef) string {
	if d, ok := Diagnose(CrashOf(p, ref.Container, logs[ref])); ok {
		return ": " + d.Cause + ". " + d.Remedy
	}
	if l := ReasonLine(logs[ref]); l != "" {
		return ": " + l
	}
	return ""
}

// DeploymentHealth is ready when the current generation is rolled out and available.
func DeploymentHealth(d *appsv1.Deployment, pods []corev1.Pod, logs Logs) WorkloadHealth {
	desired := int32(1)
	if d.Spec.Replicas != nil {
		desired = *d.Spec.Replicas
	}
	h := WorkloadHealth{Kind: "Deployment", Namespace: d.Namespace, Name: d.Name, Ready: d.Status.AvailableReplicas, Desired: desired}
	rolledOut := d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas == desired &&
		d.Status.Replicas == desired && d.Status.AvailableReplicas >= desired
	if !rolledOut {
		h.Reason = notReady(pods, logs, fmt.Sprintf("%d of %d available, %d updated", d.Status.AvailableReplicas, desired, d.Status.UpdatedReplicas))
	}
	return h
}

// StatefulSetHealth is ready when every replica is ready at the update revision.
func StatefulSetHealth(s *appsv1.StatefulSet, pods []corev1.Pod, logs Logs) WorkloadHealth {
	desired := int32(1)
	if s.Spec.Replicas != nil {
		desired = *s.Spec.Replicas
	}
	h := WorkloadHealth{Kind: "StatefulSet", Namespace: s.Namespace, Name: s.Name, Ready: s.Status.ReadyReplicas, Desired: desired}
	done := s.Status.ObservedGeneration >= s.Generation && s.Status.ReadyReplicas >= desired &&
		s.Status.UpdatedReplicas >= desired && (s.Status.UpdateRevision == "" || s.Status.CurrentRevision == s.Status.UpdateRevision)
	if !done {
		h.Reason = notReady(pods, logs, fmt.Sprintf("%d of %d ready", s.Status.ReadyReplicas, desired))
	}
	return h
}

// DaemonSetHealth is ready when every scheduled node runs an available, updated pod.
func DaemonSetHealth(ds *appsv1.DaemonSet, pods []corev1.Pod, logs Logs) WorkloadHealth {
	st := ds.Status
	h := WorkloadHealth{Kind: "DaemonSet", Namespace: ds.Namespace, Name: ds.Name, Ready: st.NumberAvailable, Desired: st.DesiredNumberScheduled}
	done := st.ObservedGeneration >= ds.Generation && st.NumberAvailable >= st.DesiredNumberScheduled &&
		st.UpdatedNumberScheduled >= st.DesiredNumberScheduled
	if !done {
		h.Reason = notReady(pods, logs, fmt.Sprintf("%d of %d available", st.NumberAvailable, st.DesiredNumberScheduled))
	}
	return h
}

// JobHealth is ready when the Job completed; Failed when it gave up.
func JobHealth(j *batchv1.Job, pods []corev1.Pod, logs Logs) WorkloadHealth {
	h := WorkloadHealth{Kind: "Job", Namespace: j.Namespace, Name: j.Name, Desired: 1}
	for _, c := range j.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case batchv1.JobComplete:
			h.Ready = 1
			return h
		case batchv1.JobFailed:
			h.Failed = true
			r := PodsReason(pods, logs)
			if r == "" {
				r = "no pod left to inspect"
			}
			h.Reason = fmt.Sprintf("job failed (%s): %s", c.Reason, r)
			return h
		}
	}
	running := fmt.Sprintf("running (%d failed attempts)", j.Status.Failed)
	if j.Status.Failed == 0 {
		running = "running"
	}
	h.Reason = notReady(pods, logs, running)
	return h
}

func notReady(pods []corev1.Pod, logs Logs, fallback string) string {
	if r := PodsReason(pods, logs); r != "" {
		return r
	}
	return fallback
}
