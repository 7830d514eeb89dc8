package daemon

import (
	"slices"
	"testing"

	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/deployment"
	"github.com/osdcloud/osd/daemon/images"
)

// TestDeployImagesAgree: the images the deployment's spec names (those of the services the
// catalog enables by default) are the images the image resource makes ready for it.
func TestDeployImagesAgree(t *testing.T) {
	want := slices.Sorted(slices.Values(images.DeployImages))
	if got := deployment.DeployImages(deploy.DefaultCatalog()); !slices.Equal(got, want) {
		t.Errorf("deployment.DeployImages(the catalog) = %v, want images.DeployImages %v", got, want)
	}
}
