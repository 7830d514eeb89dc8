package ovsdb

import (
	"reflect"
	"testing"
)

func TestMergeMap(t *testing.T) {
	tests := []struct {
		name        string
		old, kv     map[string]string
		want        map[string]string
		wantChanged bool
	}{
		{"add to nil", nil, map[string]string{"a": "1"}, map[string]string{"a": "1"}, true},
		{"same value", map[string]string{"a": "1"}, map[string]string{"a": "1"}, map[string]string{"a": "1"}, false},
		{"new value", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "3"}, map[string]string{"a": "3", "b": "2"}, true},
		{"delete", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": ""}, map[string]string{"b": "2"}, true},
		{"delete absent", map[string]string{"b": "2"}, map[string]string{"a": ""}, map[string]string{"b": "2"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := mergeMap(tc.old, tc.kv)
			if !reflect.DeepEqual(got, tc.want) || changed != tc.wantChanged {
				t.Fatalf("mergeMap(%v, %v) = %v, %v, want %v, %v", tc.old, tc.kv, got, changed, tc.want, tc.wantChanged)
			}
		})
	}
}

func TestDatabaseModel(t *testing.T) {
	m, err := DatabaseModel()
	if err != nil || m.Name() != "Open_vSwitch" {
		t.Fatalf("DatabaseModel() = %v, %v, want the Open_vSwitch model", m.Name(), err)
	}
}
