package openstack

import (
	"context"
	"encoding/json"
	"testing"
)

// TestBootFromVolume: osd launch --volume asks Nova for a boot volume made from the image
// (deleted with the server) in a cloud with block storage; without --volume the server
// boots from the image. The cloud is the loopback fake (fakeCloud); the end-to-end test
// boots the real one.
func TestBootFromVolume(t *testing.T) {
	f := &fakeCloud{status: "ACTIVE", volumes: true}
	l := f.launcher(t)
	ctx := context.Background()
	for _, tc := range []struct {
		gb   int
		want string // block_device_mapping_v2 as JSON, "null" for none
		ref  string // imageRef
	}{
		{2, `[{"boot_index":0,"delete_on_termination":true,"destination_type":"volume","source_type":"image","uuid":"i1","volume_size":2}]`, ""},
		{0, "null", "i1"},
	} {
		tg, err := l.Resolve(ctx, LaunchRequest{VolumeGB: tc.gb, NoWait: true})
		if err != nil {
			t.Fatalf("Resolve(volume %d GiB) = %v", tc.gb, err)
		}
		if _, err := l.Launch(ctx, tg, func(string) {}); err != nil {
			t.Fatalf("Launch(volume %d GiB) = %v", tc.gb, err)
		}
		b, _ := json.Marshal(f.created["block_device_mapping_v2"])
		if string(b) != tc.want || f.created["imageRef"] != tc.ref {
			t.Errorf("Launch(volume %d GiB) asked block_device_mapping_v2 = %s, imageRef %q; want %s, %q", tc.gb, b, f.created["imageRef"], tc.want, tc.ref)
		}
	}
}
