package deploy

import (
	"reflect"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestReleasePhases(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	type ph struct {
		name       string
		start, end int
	}
	tests := []struct {
		name string
		m    ReleaseMarks
		want []ph
	}{
		{"no helm action: nothing to show", ReleaseMarks{Seen: at(0), Ready: at(1)}, nil},
		{"in order", ReleaseMarks{Seen: at(0), HelmStart: at(10), HelmEnd: at(12), Scheduled: at(13), InitDone: at(20), Started: at(21), JobsDone: at(40), Ready: at(42)},
			[]ph{{"waiting", 0, 10}, {"helm", 10, 12}, {"scheduled", 12, 13}, {"init-containers", 13, 20}, {"containers-started", 20, 21}, {"jobs", 21, 40}, {"ready", 40, 42}}},
		{"jobs before the containers, no init containers, not waited", ReleaseMarks{Seen: at(5), HelmStart: at(5), HelmEnd: at(6), Scheduled: at(6), Started: at(30), JobsDone: at(20), Ready: at(31)},
			[]ph{{"helm", 5, 6}, {"scheduled", 6, 6}, {"jobs", 6, 20}, {"containers-started", 20, 30}, {"ready", 30, 31}}},
		{"marks from before the last helm action are not this install's", ReleaseMarks{Seen: at(0), HelmStart: at(50), HelmEnd: at(51), Scheduled: at(3), Started: at(60), Ready: at(61)},
			[]ph{{"waiting", 0, 50}, {"helm", 50, 51}, {"containers-started", 51, 60}, {"ready", 60, 61}}},
		{"not ready yet", ReleaseMarks{Seen: at(0), HelmStart: at(1), HelmEnd: at(2)}, []ph{{"waiting", 0, 1}, {"helm", 1, 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []ph
			for _, p := range tt.m.Phases() {
				got = append(got, ph{p.Name, int(p.Start.Sub(t0).Seconds()), int(p.End.Sub(t0).Seconds())})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Phases() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestAddMarks(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	mt := func(s int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(s) * time.Second)) }
	pod := func(sched, initEnd, start int, running bool) corev1.Pod {
		p := corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: mt(sched)}}}}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: mt(initEnd)}}}}
		st := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: mt(start)}}
		if !running {
			st = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{StartedAt: mt(start)}}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: st}}
		return p
	}
	var m ReleaseMarks
	addMarks(&m, []corev1.Pod{pod(1, 5, 6, true), pod(2, 4, 9, false)}, nil)
	done := mt(30)
	addMarks(&m, nil, &batchv1.Job{Status: batchv1.JobStatus{CompletionTime: &done}})
	addMarks(&m, nil, &batchv1.Job{}) // not complete: no mark
	want := ReleaseMarks{Scheduled: mt(2).Time, InitDone: mt(5).Time, Started: mt(9).Time, JobsDone: mt(30).Time}
	if m != want {
		t.Errorf("addMarks() = %+v, want %+v", m, want)
	}
}

func TestHoldStatus(t *testing.T) {
	children := map[string]ChildStatus{
		"keystone":  {State: StateWaiting, Message: "waiting for mariadb"},
		"glance":    {Revision: 1, ValuesHash: "old", State: StateReady},
		"placement": {Revision: 1, ValuesHash: "p", State: StateReady},
		"nova":      {Revision: 2, State: StateFailed, Message: "helm revision 2 failed"},
	}
	desired := map[string]string{"keystone": "k", "glance": "new", "placement": "p", "nova": "n"}
	held := map[string]string{"keystone": "waiting for image openstack", "glance": "waiting for image openstack",
		"placement": "waiting for image openstack", "nova": "waiting for image compute"}
	holdStatus(children, held, desired)
	want := map[string]ChildStatus{
		"keystone":  {State: StateWaiting, Message: "waiting for image openstack"},                                 // not installed: held
		"glance":    {Revision: 1, ValuesHash: "old", State: StateWaiting, Message: "waiting for image openstack"}, // upgrade pending: held
		"placement": {Revision: 1, ValuesHash: "p", State: StateReady},                                             // nothing pending
		"nova":      {Revision: 2, State: StateFailed, Message: "helm revision 2 failed"},                          // its failure stays visible
	}
	if !reflect.DeepEqual(children, want) {
		t.Errorf("holdStatus() = %v, want %v", children, want)
	}
}
