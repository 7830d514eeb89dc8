package api

import (
	"encoding/json"
	"testing"
	"time"
)

func TestResponseJSONShape(t *testing.T) {
	tests := []struct {
		name string
		in   Response
		want string
	}{
		{
			name: "sync",
			in:   Response{Type: SyncResponse, Status: "Success", StatusCode: 200, Metadata: json.RawMessage(`{"a":1}`)},
			want: `{"type":"sync","status":"Success","status_code":200,"metadata":{"a":1}}`,
		},
		{
			name: "error",
			in:   Response{Type: ErrorResponse, Status: "Not Found", StatusCode: 404, ErrorCode: 404, Error: "no such thing"},
			want: `{"type":"error","status":"Not Found","status_code":404,"error_code":404,"error":"no such thing"}`,
		},
		{
			name: "async",
			in:   Response{Type: AsyncResponse, Status: "Accepted", StatusCode: 202, Operation: "/1.0/operations/x"},
			want: `{"type":"async","status":"Accepted","status_code":202,"operation":"/1.0/operations/x"}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatalf("json.Marshal: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("json.Marshal(%s) = %s, want %s", tt.name, got, tt.want)
			}
		})
	}
}

func TestMetadataAs(t *testing.T) {
	r := Response{Metadata: json.RawMessage(`{"version":"1.2","state":"running","kubernetes":{"api_ready":true,"node_name":"n1"}}`)}
	var info ServerInfo
	if err := r.MetadataAs(&info); err != nil {
		t.Fatalf("MetadataAs: %v", err)
	}
	if info.Version != "1.2" || info.State != StateRunning || !info.Kubernetes.APIReady || info.Kubernetes.NodeName != "n1" {
		t.Errorf("MetadataAs() = %+v, want version 1.2, running, api ready on n1", info)
	}
	empty := Response{}
	info = ServerInfo{Version: "keep"}
	if err := empty.MetadataAs(&info); err != nil || info.Version != "keep" {
		t.Errorf("MetadataAs(empty) = %+v, %v, want untouched and nil", info, err)
	}
}

func TestServerInfoSnakeCase(t *testing.T) {
	info := ServerInfo{Version: "v", State: StateStarting, StateDir: "/var/lib/osd", Uptime: "1s",
		Kubernetes: KubernetesStatus{Reason: "apiserver not answering"}}
	b, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"version", "state", "state_dir", "uptime", "kubernetes"} {
		if _, ok := m[key]; !ok {
			t.Errorf("json.Marshal(ServerInfo) = %s, want key %q", b, key)
		}
	}
	if _, ok := m["started_at"]; ok {
		t.Errorf("json.Marshal(ServerInfo) = %s, want zero started_at omitted", b)
	}
	k := m["kubernetes"].(map[string]any)
	for _, key := range []string{"api_ready", "node_ready", "reason"} {
		if _, ok := k[key]; !ok {
			t.Errorf("json.Marshal(KubernetesStatus) = %v, want key %q", k, key)
		}
	}
}

func TestJournalEntryJSON(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	e := JournalEntry{ID: 3, Run: "r", Step: "ovs", State: StepFinished, StartedAt: start}
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":3,"run":"r","step":"ovs","state":"finished","started_at":"2026-01-02T03:04:05Z"}`
	if string(b) != want {
		t.Errorf("json.Marshal(JournalEntry) = %s, want %s", b, want)
	}
}
