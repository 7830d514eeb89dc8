package images

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	bimages "github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/cluster"
	"github.com/osdcloud/osd/daemon/k3s"
	"github.com/osdcloud/osd/daemon/rest"
)

// Images reach the cluster's other nodes without a registry: the node that built (or
// imported) them serves its store to members over the authenticated API (GET
// /1.0/images, GET /1.0/images/blobs/{digest}), and each member fetches what its roles
// run and it lacks (bootstrap/images Fetch: by digest, resumable, verified), then imports
// it into its containerd. Members look again every minute, so an image built or imported
// later reaches them the same way.

// roleImages are the service images each role runs: a compute node runs nova-compute
// (compute), ovn-controller (ovn) and the OVN metadata agent (openstack, which also
// renders every chart's configuration); a network node the gateway chassis and the
// metadata agent; a storage node Ceph and cinder-volume; a control node every service the
// deployment runs.
var roleImages = map[string][]string{
	api.RoleCompute: {"openstack", "compute", "ovn"},
	api.RoleNetwork: {"openstack", "ovn"},
	api.RoleStorage: {"openstack", "ceph"},
	api.RoleControl: DeployImages,
}

// RoleImages are the images a node with roles needs, sorted (pure): those of its roles
// that the deployment runs (DeployImages).
func RoleImages(roles []string) []string {
	var out []string
	for _, r := range roles {
		for _, n := range roleImages[r] {
			if !slices.Contains(out, n) && slices.Contains(DeployImages, n) {
				out = append(out, n)
			}
		}
	}
	sort.Strings(out)
	return out
}

// ImagesState says whether a node holding held (name -> digest in its containerd) has
// every image of want (name -> digest the cluster serves) (pure): "current", or what it
// lacks and what it holds at another digest.
func ImagesState(want, held map[string]string) string {
	var missing, outdated []string
	for n, d := range want {
		switch h := held[n]; {
		case h == "":
			missing = append(missing, n)
		case h != d:
			outdated = append(outdated, n)
		}
	}
	if len(missing)+len(outdated) == 0 {
		return "current"
	}
	sort.Strings(missing)
	sort.Strings(outdated)
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, "missing "+strings.Join(missing, ","))
	}
	if len(outdated) > 0 {
		parts = append(parts, "outdated "+strings.Join(outdated, ","))
	}
	return strings.Join(parts, "; ")
}

// DescribeMembers says for each member of a listing whether it holds the images of its
// roles at the digests this node serves (Images: "current", or what it lacks); this
// node's own entry also gets what it holds. Nothing when this node serves no image.
func (s *Service) DescribeMembers(ctx context.Context, ms []api.Member) {
	served, err := s.Served()
	if err != nil || len(served) == 0 {
		return
	}
	for i := range ms {
		if ms[i].Local {
			if held, err := s.Held(ctx); err == nil && held != nil {
				ms[i].HeldImages = held
			}
		}
		if ms[i].HeldImages == nil {
			continue
		}
		want := map[string]string{}
		for _, n := range RoleImages(ms[i].Roles) {
			if d, ok := served[n]; ok {
				want[n] = d
			}
		}
		ms[i].Images = ImagesState(want, ms[i].HeldImages)
	}
}

// Served is what this node serves members: each stored image's digest by name.
func (s *Service) Served() (map[string]string, error) {
	st, err := s.Builder().Store()
	if err != nil {
		return nil, err
	}
	all, err := st.List()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, x := range all {
		out[x.Name] = x.Digest
	}
	return out, nil
}

// Held is what this node's containerd holds of the stored images: digest by name ("" for
// an image it lacks). Nothing when containerd does not run.
func (s *Service) Held(ctx context.Context) (map[string]string, error) {
	if !s.st.Node.ContainerdRunning() {
		return nil, nil
	}
	st, err := s.Builder().Store()
	if err != nil {
		return nil, err
	}
	all, err := st.List()
	if err != nil {
		return nil, err
	}
	sock := s.st.Cfg.K3s().ContainerdSocket()
	out := map[string]string{}
	for _, x := range all {
		d, err := k3s.ImageDigest(ctx, sock, x.Ref)
		if err != nil {
			return nil, err
		}
		out[x.Name] = d
	}
	return out, nil
}

// getBlob serves one blob of a stored image (ranges allowed, so a member continues a
// broken download). Members and operators only (access table).
func (s *Service) getBlob(r *http.Request) rest.Response {
	digest := rest.Var(r, "digest")
	st, err := s.Builder().Store()
	if err != nil {
		return rest.ErrorResponse(err)
	}
	path, _, err := st.ServedBlob(digest)
	if errors.Is(err, bimages.ErrNotServed) {
		return rest.ErrorResponse(rest.Errorf(rest.ErrNotFound, "%v", err))
	}
	if err != nil {
		return rest.ErrorResponse(rest.Errorf(rest.ErrBadRequest, "%v", err))
	}
	f, err := os.Open(path)
	if err != nil {
		return rest.ErrorResponse(err)
	}
	return rest.ManualResponse(func(w http.ResponseWriter) error {
		defer f.Close()
		// A layer of hundreds of MB may outlast the API's write deadline.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(30 * time.Minute))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("ETag", `"`+digest+`"`)
		http.ServeContent(w, r, "", time.Time{}, f)
		return nil
	})
}

// SyncFromCluster makes this member hold, in its store and its containerd, the images its
// roles run at the digests the cluster serves: it fetches what differs, then imports into
// containerd what containerd lacks at that digest (when containerd runs). emit reports
// progress.
func (s *Service) SyncFromCluster(ctx context.Context, remote cluster.ImageSource, roles []string, emit func(string)) (bool, string, error) {
	list, err := remote.List(ctx)
	if err != nil {
		return false, "", err
	}
	want := RoleImages(roles)
	var names []string
	var fetches []bimages.Stored
	for _, im := range list {
		if slices.Contains(want, im.Name) && im.Stored && im.Digest != "" {
			names = append(names, im.Name)
			fetches = append(fetches, bimages.Stored{Name: im.Name, Ref: im.Ref, Digest: im.Digest})
		}
	}
	if len(fetches) == 0 {
		return false, "the cluster serves no image for roles " + strings.Join(roles, ","), nil
	}
	s.busy.Lock()
	defer s.busy.Unlock()
	st, err := s.Builder().Store()
	if err != nil {
		return false, "", err
	}
	var got int64
	var fetched []string
	for _, f := range fetches {
		res, err := st.Fetch(ctx, remote, f)
		if err != nil {
			return len(fetched) > 0, "", err
		}
		if res.Blobs+res.Reused > 0 {
			fetched = append(fetched, f.Name)
			got += res.Downloaded
			emit(fmt.Sprintf("%s: fetched %d MB in %s (%d blobs, %d held already)", f.Name, res.Downloaded>>20, res.Took.Round(100*time.Millisecond), res.Blobs, res.Reused))
		}
	}
	var imported []string
	if s.st.Node.ContainerdRunning() {
		if imported, err = s.ImportStored(ctx, names...); err != nil {
			return true, "", err
		}
	}
	if len(fetched)+len(imported) > 0 {
		slog.Info("images from the cluster", "fetched", fetched, "MB", got>>20, "imported", imported)
	}
	return len(fetched)+len(imported) > 0, fmt.Sprintf("%s: %d fetched (%d MB), %d imported into containerd",
		strings.Join(names, ", "), len(fetched), got>>20, len(imported)), nil
}
