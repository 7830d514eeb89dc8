package ovnsb

import (
	"reflect"
	"testing"
)

func TestDescribe(t *testing.T) {
	chassis := []Chassis{
		{UUID: "c2", Name: "b7f0", Hostname: "node2", Encaps: []string{"e2"}},
		{UUID: "c1", Name: "a1c3", Hostname: "node1", Encaps: []string{"e1", "e3"}},
	}
	encaps := []Encap{{UUID: "e1", Type: "geneve", IP: "10.0.0.1"}, {UUID: "e2", Type: "geneve", IP: "10.0.0.2"}, {UUID: "e3", Type: "vxlan", IP: "10.0.0.1"}}
	want := []ChassisInfo{
		{Name: "a1c3", Hostname: "node1", Encaps: []string{"geneve 10.0.0.1", "vxlan 10.0.0.1"}},
		{Name: "b7f0", Hostname: "node2", Encaps: []string{"geneve 10.0.0.2"}},
	}
	if got := Describe(chassis, encaps); !reflect.DeepEqual(got, want) {
		t.Errorf("Describe() = %+v, want %+v", got, want)
	}
}

func TestDatabaseModel(t *testing.T) {
	if _, err := DatabaseModel(); err != nil {
		t.Fatalf("DatabaseModel() = %v", err)
	}
}
