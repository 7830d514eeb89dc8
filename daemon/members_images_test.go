package daemon

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"math/rand"
	"net/http"
	"os"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/osdcloud/osd/bootstrap/images"
	"github.com/osdcloud/osd/bootstrap/images/oci"
	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/client"
	"github.com/osdcloud/osd/daemon/cluster"
)

// TestMemberFetchesImages runs a real daemon (no Kubernetes) whose image store holds one
// image, and a member joined to it: over the member's certificate the catalog lists the
// image, a blob comes whole or from an offset (a broken download continues), and a
// member's store fetches the image and holds it at the cluster's digest. A blob no image
// references, or a malformed digest, is refused; without a certificate nothing is served;
// the member may not put a node into maintenance (operators only); once removed, its
// certificate gets nothing.
func TestMemberFetchesImages(t *testing.T) {
	srv, srvAPI := testDaemon(t, "node1", fakeKubernetes)
	ctx := context.Background()
	st, err := srv.images.Builder().Store()
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 1<<20)
	rand.New(rand.NewSource(3)).Read(data) // test data, not a secret
	img, err := oci.ImageFromFiles([]oci.File{{Path: "data", Mode: 0o644, Data: data}}, oci.ImageConfig{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := st.Put(img, images.Stored{Name: "ovn", Ref: "localhost/osd/ovn:test"})
	if err != nil {
		t.Fatal(err)
	}
	id, addr := joinAs(t, issue(t, srvAPI, "node7"))
	remote, err := cluster.NewClusterImages(id, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	list, err := remote.List(ctx)
	if err != nil || len(list) == 0 || !hasImage(list, "ovn", stored.Digest) {
		t.Fatalf("the cluster's images as a member = %+v, %v, want ovn at %s", list, err, stored.Digest)
	}

	m, _ := img.Manifest()
	layer := m.Layers[0].Digest
	path, size, err := st.ServedBlob(layer.String())
	if err != nil {
		t.Fatal(err)
	}
	whole, _ := os.ReadFile(path)
	for _, offset := range []int64{0, 1000, size - 1} {
		body, from, err := remote.Blob(ctx, layer, offset)
		if err != nil {
			t.Fatalf("Blob(layer, %d) = %v", offset, err)
		}
		got, _ := io.ReadAll(body)
		body.Close()
		if from != offset || !bytes.Equal(got, whole[offset:]) {
			t.Errorf("Blob(layer, %d) = %d bytes from %d, want the %d bytes from %d", offset, len(got), from, size-offset, offset)
		}
	}
	for digest, want := range map[string]int{"sha256:" + strings.Repeat("0", 64): http.StatusNotFound, "sha256:xyz": http.StatusBadRequest} {
		h := v1.Hash{Algorithm: "sha256", Hex: strings.TrimPrefix(digest, "sha256:")}
		if _, _, err := remote.Blob(ctx, h, 0); statusOf(err) != want {
			t.Errorf("Blob(%s) = %v, want %d", digest, err, want)
		}
	}

	member, err := images.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := member.Fetch(ctx, remote, images.Stored{Name: "ovn", Ref: "localhost/osd/ovn:test", Digest: stored.Digest}); err != nil {
		t.Fatalf("Fetch(ovn) from the cluster = %v", err)
	}
	if _, got, err := member.Get("ovn"); err != nil || got.Digest != stored.Digest {
		t.Errorf("the member's store after Fetch: %+v, %v, want ovn at %s", got, err, stored.Digest)
	}

	anon := client.New("https://"+addr, cluster.NewHTTPClient(mustTLS(t, id, addr, nil)))
	if err := anon.Query(ctx, http.MethodGet, "images", nil, nil); statusOf(err) != http.StatusUnauthorized {
		t.Errorf("GET images without a certificate = %v, want 401", err)
	}
	asMember := client.New("https://"+addr, cluster.NewHTTPClient(mustTLS(t, id, addr, id)))
	if err := asMember.Query(ctx, http.MethodPut, "cluster/members/node7/maintenance", api.MaintenanceRequest{Enabled: true}, nil); statusOf(err) != http.StatusForbidden {
		t.Errorf("PUT maintenance as a member = %v, want 403 (operators only)", err)
	}
	if err := srv.clusterSvc.RemoveMember(ctx, "node7"); err != nil {
		t.Fatal(err)
	}
	if _, err := remote.List(ctx); statusOf(err) != http.StatusForbidden {
		t.Errorf("the cluster's images as a removed member = %v, want 403", err)
	}
}

func hasImage(list []api.ImageStatus, name, digest string) bool {
	for _, im := range list {
		if im.Name == name && im.Digest == digest && im.Stored {
			return true
		}
	}
	return false
}

// mustTLS is the client TLS configuration pinning id's CA for addr, presenting as's
// certificate (nil: none).
func mustTLS(t *testing.T, id *cluster.MemberIdentity, addr string, as *cluster.MemberIdentity) *tls.Config {
	t.Helper()
	var cert *tls.Certificate
	if as != nil {
		cert = &as.Cert
	}
	cfg, err := cluster.ClientTLSConfigFor(cluster.Fingerprint(id.CA), addr, cert)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
