package converge

import (
	"errors"
	"strings"
	"testing"

	"github.com/osdcloud/osd/daemon/rest"
	"github.com/osdcloud/osd/daemon/store"
)

func TestReleaseFor(t *testing.T) {
	fresh := store.Host{}
	zedCloud := store.Host{Initialized: true} // deployed before releases were recorded
	epoxyCloud := store.Host{Initialized: true, Release: "epoxy"}
	for _, c := range []struct {
		name    string
		h       store.Host
		asked   string
		want    string
		wantErr error
		say     string
	}{
		{"a new cloud: the default", fresh, "", "zed", nil, ""},
		{"a new cloud: asked by name", fresh, "epoxy", "epoxy", nil, ""},
		{"a new cloud: asked by series, any case", fresh, " 2025.1", "epoxy", nil, ""},
		{"a new cloud: unknown", fresh, "victoria", "", rest.ErrBadRequest, "osd deploys zed, epoxy"},
		{"an old cloud keeps zed", zedCloud, "", "zed", nil, ""},
		{"an old cloud asked for zed", zedCloud, "zed", "zed", nil, ""},
		{"an old cloud is not moved to epoxy", zedCloud, "epoxy", "zed", rest.ErrConflict, "release upgrade"},
		{"an epoxy cloud keeps epoxy", epoxyCloud, "", "epoxy", nil, ""},
		{"an epoxy cloud is not moved back", epoxyCloud, "zed", "epoxy", rest.ErrConflict, "osd reset and osd init --release zed"},
		{"a record of an unknown release", store.Host{Initialized: true, Release: "flamingo"}, "", "", rest.ErrConflict, "install the osd version"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := releaseFor(c.h, c.asked)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) || !strings.Contains(err.Error(), c.say) {
					t.Fatalf("releaseFor() = %v, want %v saying %q", err, c.wantErr, c.say)
				}
				if c.want != "" && got.Name != c.want {
					t.Errorf("releaseFor() refused with %q, want the cloud's %q", got.Name, c.want)
				}
				return
			}
			if err != nil || got.Name != c.want {
				t.Errorf("releaseFor() = %q, %v, want %q", got.Name, err, c.want)
			}
		})
	}
}
