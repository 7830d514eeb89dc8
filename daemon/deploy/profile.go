package deploy

import (
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// ReleaseMarks are the moments of one release's way to Ready, as this controller saw
// them (zero: not seen). The Kubernetes ones are read from the release's pods and Jobs
// in the pass that first saw it Ready after its last Helm action.
type ReleaseMarks struct {
	Seen      time.Time // first pass that wanted it
	HelmStart time.Time // its last Helm action
	HelmEnd   time.Time
	Scheduled time.Time // its last pod scheduled
	InitDone  time.Time // its pods' init containers done
	Started   time.Time // its pods' containers (last) started
	JobsDone  time.Time // its Jobs complete
	Ready     time.Time // seen Ready
}

// Phase is one stretch of a release's way to Ready: it ended at End.
type Phase struct {
	Name       string
	Start, End time.Time
}

// Phases are the release's stretches, each ending at one of its marks in time order
// (pure): waiting (for its dependencies, until Helm starts), helm, then scheduled,
// init-containers, containers-started and jobs in the order they happened, and ready.
// A release without a Helm action in this controller has none.
func (m ReleaseMarks) Phases() []Phase {
	if m.HelmStart.IsZero() || m.HelmEnd.IsZero() {
		return nil
	}
	out := []Phase{}
	if !m.Seen.IsZero() && m.HelmStart.After(m.Seen) {
		out = append(out, Phase{Name: "waiting", Start: m.Seen, End: m.HelmStart})
	}
	out = append(out, Phase{Name: "helm", Start: m.HelmStart, End: m.HelmEnd})
	type mark struct {
		name string
		at   time.Time
	}
	var marks []mark
	for _, x := range []mark{{"scheduled", m.Scheduled}, {"init-containers", m.InitDone}, {"containers-started", m.Started}, {"jobs", m.JobsDone}} {
		if !x.at.IsZero() && !x.at.Before(m.HelmEnd) {
			marks = append(marks, x)
		}
	}
	sort.SliceStable(marks, func(i, j int) bool { return marks[i].at.Before(marks[j].at) })
	if !m.Ready.IsZero() {
		marks = append(marks, mark{"ready", m.Ready})
	}
	last := m.HelmEnd
	for _, x := range marks {
		if x.at.Before(last) {
			x.at = last
		}
		out = append(out, Phase{Name: x.name, Start: last, End: x.at})
		last = x.at
	}
	return out
}

// podMarks are the latest scheduling, init-container and container-start times of pods
// (pure).
func podMarks(pods []corev1.Pod) (scheduled, initDone, started time.Time) {
	later := func(t *time.Time, c time.Time) {
		if c.After(*t) {
			*t = c
		}
	}
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
				later(&scheduled, c.LastTransitionTime.Time)
			}
		}
		for _, s := range p.Status.InitContainerStatuses {
			if s.State.Terminated != nil {
				later(&initDone, s.State.Terminated.FinishedAt.Time)
			}
		}
		for _, s := range p.Status.ContainerStatuses {
			switch {
			case s.State.Running != nil:
				later(&started, s.State.Running.StartedAt.Time)
			case s.State.Terminated != nil:
				later(&started, s.State.Terminated.StartedAt.Time)
			}
		}
	}
	return scheduled, initDone, started
}

// addMarks adds a workload's pods (or a Job's completion) to the marks seen in a pass.
func addMarks(m *ReleaseMarks, pods []corev1.Pod, job *batchv1.Job) {
	if job != nil {
		if job.Status.CompletionTime != nil && job.Status.CompletionTime.After(m.JobsDone) {
			m.JobsDone = job.Status.CompletionTime.Time
		}
		return
	}
	s, i, st := podMarks(pods)
	for _, x := range []struct {
		dst *time.Time
		v   time.Time
	}{{&m.Scheduled, s}, {&m.InitDone, i}, {&m.Started, st}} {
		if x.v.After(*x.dst) {
			*x.dst = x.v
		}
	}
}

// Timeline returns the marks of every release this controller saw.
func (c *Controller) Timeline() map[string]ReleaseMarks {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]ReleaseMarks, len(c.marks))
	for n, m := range c.marks {
		out[n] = *m
	}
	return out
}

// mark returns the marks of release name, made on first use.
func (c *Controller) mark(name string) *ReleaseMarks {
	if c.marks == nil {
		c.marks = map[string]*ReleaseMarks{}
	}
	m, ok := c.marks[name]
	if !ok {
		m = &ReleaseMarks{Seen: c.clock()}
		c.marks[name] = m
	}
	return m
}

func (c *Controller) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// noteReady records, for every release Ready now for the first time since its last Helm
// action, that moment and what its pods and Jobs said in this pass.
func (c *Controller) noteReady(ready map[string]bool, seen map[string]*ReleaseMarks) {
	for name, ok := range ready {
		m := c.mark(name)
		if !ok || m.HelmEnd.IsZero() || !m.Ready.IsZero() {
			continue
		}
		if s := seen[name]; s != nil {
			m.Scheduled, m.InitDone, m.Started, m.JobsDone = s.Scheduled, s.InitDone, s.Started, s.JobsDone
		}
		m.Ready = c.clock()
	}
}
