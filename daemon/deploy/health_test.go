package deploy

import (
	"reflect"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(name string, age time.Duration, mutate func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(1e9, 0).Add(-age))},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if mutate != nil {
		mutate(&p)
	}
	return p
}

func waiting(name, image, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Image: image, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: "secret \"x\" not found"}}}
}

func TestPodsReason(t *testing.T) {
	f := false
	tests := []struct {
		name string
		pods []corev1.Pod
		logs Logs
		want string // substring; "" means exactly empty
	}{
		{name: "healthy", pods: []corev1.Pod{pod("a", 0, func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		})}, want: ""},
		{name: "unschedulable", pods: []corev1.Pod{pod("a", 0, func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/1 nodes are available: 1 Insufficient memory."}}
		})}, want: "pod a unschedulable: 0/1 nodes are available: 1 Insufficient memory."},
		{name: "image never pulled", pods: []corev1.Pod{pod("a", 0, func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("c", "osd/openstack:1", "ErrImageNeverPull")}
		})}, want: "image osd/openstack:1 not available (ErrImageNeverPull)"},
		{name: "image pull backoff", pods: []corev1.Pod{pod("a", 0, func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("c", "osd/x:1", "ImagePullBackOff")}
		})}, want: "image osd/x:1 not available (ImagePullBackOff)"},
		{name: "crash loop with log", pods: []corev1.Pod{pod("a", 0, func(p *corev1.Pod) {
			cs := waiting("keystone", "img", "CrashLoopBackOff")
			cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
		})}, logs: Logs{{"a", "keystone", true}: "  ImportError: no module named foo \n"},
			want: "pod a: container keystone crash-looping (exit code 1): ImportError: no module named foo"},
		{name: "crash loop oomkilled", pods: []corev1.Pod{pod("a", 0, func(p *corev1.Pod) {
			cs := waiting("c", "img", "CrashLoopBackOff")
			cs.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{cs}
		})}, want: "crash-looping (exit code 137, OOMKilled)"},
		{name: "failed init step of a job", pods: []corev1.Pod{pod("job-1", 0, func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.InitContainerStatuses = []corev1.ContainerStatus{
				{Name: "db-create", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
				{Name: "db-sync", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Reason: "Error"}}},
			}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("bootstrap", "img", "PodInitializing")}
		})}, logs: Logs{{"job-1", "db-sync", false}: "sqlalchemy.exc.OperationalError: (1045, Access denied)"},
			want: "pod job-1: init step db-sync failed (exit code 2): sqlalchemy.exc.OperationalError: (1045, Access denied)"},
		{name: "missing secret", pods: []corev1.Pod{pod("a", 0, func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("c", "img", "CreateContainerConfigError")}
		})}, want: "container c: CreateContainerConfigError: secret \"x\" not found"},
		{name: "readiness probe failing", pods: []corev1.Pod{pod("a", 0, func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		})}, want: "pod a: container c not ready (readiness probe failing)"},
		{name: "startup probe pending", pods: []corev1.Pod{pod("a", 0, func(p *corev1.Pod) {
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Started: &f, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		})}, want: "starting (startup probe not yet passing)"},
		{name: "pending without detail", pods: []corev1.Pod{pod("a", 0, func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending })}, want: "pod a pending"},
		{name: "worst problem wins over newer mild one", pods: []corev1.Pod{
			pod("new", 0, func(p *corev1.Pod) {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
			}),
			pod("old", time.Hour, func(p *corev1.Pod) {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("c", "img:2", "ErrImageNeverPull")}
			}),
		}, want: "pod old: image img:2 not available"},
		{name: "terminating pods ignored", pods: []corev1.Pod{pod("a", 0, func(p *corev1.Pod) {
			now := metav1.Now()
			p.DeletionTimestamp = &now
			p.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("c", "img", "ErrImageNeverPull")}
		})}, want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PodsReason(tt.pods, tt.logs)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Fatalf("PodsReason() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLogTargets(t *testing.T) {
	cl := waiting("a", "img", "CrashLoopBackOff")
	cl.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 1}
	// rabbitmq-server exits 0 when its boot fails: crash-looping all the same.
	cl0 := waiting("zero", "img", "CrashLoopBackOff")
	cl0.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0}
	restarting := waiting("restarted", "img", "ContainerCreating")
	restarting.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0}
	pods := []corev1.Pod{pod("p", 0, func(p *corev1.Pod) {
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{
			{Name: "ok", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
			{Name: "bad", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3}}},
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{cl, cl0, restarting, {Name: "fine", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
	})}
	want := []ContainerRef{{"p", "bad", false}, {"p", "a", true}, {"p", "zero", true}}
	if got := LogTargets(pods); !reflect.DeepEqual(got, want) {
		t.Fatalf("LogTargets() = %v, want %v", got, want)
	}
}

func TestWorkloadHealth(t *testing.T) {
	two := int32(2)
	one := int32(1)
	crash := []corev1.Pod{pod("x", 0, func(p *corev1.Pod) {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("c", "img", "CrashLoopBackOff")}
	})}
	meta := metav1.ObjectMeta{Namespace: "openstack", Name: "w", Generation: 2}
	tests := []struct {
		name  string
		got   WorkloadHealth
		ready int32
		want  string // reason substring, "" = ready
		fail  bool
	}{
		{name: "deployment ready", got: DeploymentHealth(&appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: &two},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}}, nil, nil), ready: 2},
		{name: "deployment old generation", got: DeploymentHealth(&appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: &two},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}}, nil, nil), ready: 2, want: "2 of 2 available, 2 updated"},
		{name: "deployment rolling with crash", got: DeploymentHealth(&appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: &two},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, AvailableReplicas: 2}}, crash, nil), ready: 2, want: "crash-looping"},
		{name: "statefulset ready", got: StatefulSetHealth(&appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: &one},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 1, UpdatedReplicas: 1, CurrentRevision: "r1", UpdateRevision: "r1"}}, nil, nil), ready: 1},
		{name: "statefulset updating", got: StatefulSetHealth(&appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: &one},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 1, UpdatedReplicas: 1, CurrentRevision: "r1", UpdateRevision: "r2"}}, nil, nil), ready: 1, want: "1 of 1 ready"},
		{name: "daemonset ready", got: DaemonSetHealth(&appsv1.DaemonSet{ObjectMeta: meta,
			Status: appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, NumberAvailable: 3, UpdatedNumberScheduled: 3}}, nil, nil), ready: 3},
		{name: "daemonset short", got: DaemonSetHealth(&appsv1.DaemonSet{ObjectMeta: meta,
			Status: appsv1.DaemonSetStatus{ObservedGeneration: 2, DesiredNumberScheduled: 3, NumberAvailable: 1, UpdatedNumberScheduled: 3}}, nil, nil), ready: 1, want: "1 of 3 available"},
		{name: "job complete", got: JobHealth(&batchv1.Job{ObjectMeta: meta, Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}, nil, nil), ready: 1},
		{name: "job running", got: JobHealth(&batchv1.Job{ObjectMeta: meta}, nil, nil), want: "running"},
		{name: "job retrying", got: JobHealth(&batchv1.Job{ObjectMeta: meta, Status: batchv1.JobStatus{Failed: 2}}, nil, nil), want: "running (2 failed attempts)"},
		{name: "job failed with log", got: JobHealth(&batchv1.Job{ObjectMeta: meta, Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}}},
			[]corev1.Pod{pod("j", 0, func(p *corev1.Pod) {
				p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "bootstrap", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}}}
			})}, Logs{{"j", "bootstrap", false}: "keystone.exception.Conflict"}),
			want: "job failed (BackoffLimitExceeded): pod j: container bootstrap failed (exit code 1): keystone.exception.Conflict", fail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got.Ready != tt.ready {
				t.Errorf("Ready = %d, want %d", tt.got.Ready, tt.ready)
			}
			if tt.got.Failed != tt.fail {
				t.Errorf("Failed = %v, want %v", tt.got.Failed, tt.fail)
			}
			if tt.want == "" && tt.got.Reason != "" || !strings.Contains(tt.got.Reason, tt.want) {
				t.Errorf("Reason = %q, want %q", tt.got.Reason, tt.want)
			}
		})
	}
}

func TestReasonLine(t *testing.T) {
	for _, tt := range []struct {
		name, log, want string
	}{
		{"plain", "starting\nfatal: no config\n\n", "fatal: no config"},
		{"oslo traceback ending in a colour reset",
			"2026-11-21 15:24:26.759 1 ERROR neutron     sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)\n" +
				"2026-11-21 15:24:26.759 1 ERROR neutron AttributeError: 'NoneType' object has no attribute 'setsockopt'\n" +
				"2026-11-21 15:24:26.759 1 ERROR neutron \x1b[00m\n",
			"AttributeError: 'NoneType' object has no attribute 'setsockopt'"},
		{"oslo with request id", "2026-11-21 15:24:26.759 7 WARNING nova.scheduler [req-1 - - - - -] No valid host\n", "No valid host"},
		{"sqlalchemy trailer after a missing table",
			"2026-11-21 18:14:02.101 1 ERROR neutron sqlalchemy.exc.ProgrammingError: (pymysql.err.ProgrammingError) (1146, \"Table 'neutron.ovn_hash_ring' doesn't exist\")\n" +
				"2026-11-21 18:14:02.101 1 ERROR neutron [SQL: SELECT ovn_hash_ring.node_uuid FROM ovn_hash_ring]\n" +
				"2026-11-21 18:14:02.101 1 ERROR neutron [parameters: ('neutron',)]\n" +
				"2026-11-21 18:14:02.101 1 ERROR neutron (Background on this error at: https://sqlalche.me/e/14/f405)\x1b[00m\n",
			"sqlalchemy.exc.ProgrammingError: (pymysql.err.ProgrammingError) (1146, \"Table 'neutron.ovn_hash_ring' doesn't exist\") (the database schema is not there yet: the service's init Job migrates it)"},
		{"sqlalchemy error without a missing table",
			"sqlalchemy.exc.OperationalError: (pymysql.err.OperationalError) (2003, \"Can't connect to MySQL server on 'mariadb'\")\n(Background on this error at: https://sqlalche.me/e/14/e3q8)\n",
			"sqlalchemy.exc.OperationalError: (pymysql.err.OperationalError) (2003, \"Can't connect to MySQL server on 'mariadb'\")"},
		{"colours only", "\x1b[01;31mred\x1b[00m\n", "red"},
		{"empty", "", ""},
	} {
		if got := ReasonLine(tt.log); got != tt.want {
			t.Errorf("ReasonLine(%s) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestStaleNodes: after a restart, a node whose kubelet has not renewed its lease since,
// or that is not Ready, is stale; the pods on it make their workload not ready, whatever
// the cluster recorded before.
func TestStaleNodes(t *testing.T) {
	since := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	node := func(name string, ready corev1.ConditionStatus) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
	}
	nodes := []corev1.Node{node("fresh", corev1.ConditionTrue), node("before", corev1.ConditionTrue), node("nolease", corev1.ConditionTrue), node("down", corev1.ConditionFalse)}
	renewed := map[string]time.Time{"fresh": since.Add(5 * time.Second), "before": since.Add(-time.Minute), "down": since.Add(time.Second)}
	stale := StaleNodes(nodes, renewed, since)
	if _, ok := stale["fresh"]; ok || len(stale) != 3 {
		t.Fatalf("StaleNodes() = %v, want before, nolease and down", stale)
	}
	if !strings.Contains(stale["before"], "has not reported since 2026-11-23T12:00:00Z") || !strings.Contains(stale["down"], "not ready") {
		t.Errorf("StaleNodes() = %v, want the reasons", stale)
	}
	pod := func(name, node string) corev1.Pod {
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	}
	if got := StaleReason([]corev1.Pod{pod("a", "fresh"), pod("b", "before")}, stale); !strings.HasPrefix(got, "pod b: node before has not reported") {
		t.Errorf("StaleReason() = %q, want pod b's node", got)
	}
	if got := StaleReason([]corev1.Pod{pod("a", "fresh"), pod("c", "")}, stale); got != "" {
		t.Errorf("StaleReason(fresh and unscheduled pods) = %q, want none", got)
	}
}
