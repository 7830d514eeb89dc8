package charts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osdcloud/osd/daemon/deploy"
	corev1 "k8s.io/api/core/v1"
)

// storageSpec is a deployment with backend and the monitor address the daemon sets for svc.
func storageSpec(backend, svc string, o map[string]any) deploy.DeploymentSpec {
	spec := cephSpec(nil)
	spec.Features.Storage = backend
	spec.Services = map[string]deploy.ServiceSpec{svc: {Overrides: deploy.Merge(map[string]any{"ceph": map[string]any{"monHost": "10.0.0.5"}}, o)}}
	return spec
}

// TestGlanceCeph: with Ceph, new images go to RBD as client.glance and the file store stays
// readable; without it nothing of Ceph is rendered.
func TestGlanceCeph(t *testing.T) {
	objs, _, _ := renderAPI(t, "glance", storageSpec("ceph", "glance", nil))
	files := objs.secrets[0].StringData
	conf, err := novaParseINI(files["glance-api.conf"])
	if err != nil {
		t.Fatal(err)
	}
	for s, kv := range map[string]map[string]string{
		"DEFAULT":      {"enabled_backends": "rbd:rbd,file:file", "show_image_direct_url": "true"},
		"glance_store": {"default_backend": "rbd"},
		"rbd":          {"rbd_store_pool": "images", "rbd_store_user": "glance", "rbd_store_ceph_conf": "/etc/ceph/ceph.conf"},
		"file":         {"filesystem_store_datadir": "/var/lib/glance/images/"},
	} {
		for k, v := range kv {
			if conf[s][k] != v {
				t.Errorf("glance-api.conf [%s] %s = %q, want %q", s, k, conf[s][k], v)
			}
		}
	}
	if files["ceph.conf"] != "[global]\nmon_host = 10.0.0.5\n" || files["ceph.client.glance.keyring"] != "[client.glance]\nkey = @@CEPH_GLANCE_KEY@@\n" {
		t.Errorf("glance ceph files = %q, %q", files["ceph.conf"], files["ceph.client.glance.keyring"])
	}
	pod := objs.deployment.Spec.Template.Spec
	mounts := mountsOf(pod.Containers[0])
	if mounts["ceph.conf"] != "/etc/ceph/ceph.conf" || mounts["ceph.client.glance.keyring"] != "/etc/ceph/ceph.client.glance.keyring" {
		t.Errorf("glance-api mounts = %v, want ceph.conf and client.glance's keyring under /etc/ceph", mounts)
	}
	render := containerByName(pod.InitContainers, "config-render")
	dir, values := runConfigRender(t, render, files)
	b, _ := os.ReadFile(filepath.Join(dir, "ceph.client.glance.keyring"))
	if values["CEPH_GLANCE_KEY"] == "" || !strings.Contains(string(b), values["CEPH_GLANCE_KEY"]) {
		t.Errorf("rendered keyring = %q, want the key from Secret ceph-client-glance", b)
	}
	if e := envByName(render, "CEPH_GLANCE_KEY"); e == nil || e.ValueFrom.SecretKeyRef.Name != "ceph-client-glance" {
		t.Errorf("config-render CEPH_GLANCE_KEY = %+v, want Secret ceph-client-glance", e)
	}

	plain, _, _ := renderAPI(t, "glance", storageSpec("lvm", "glance", nil))
	if _, ok := plain.secrets[0].StringData["ceph.conf"]; ok || strings.Contains(plain.secrets[0].StringData["glance-api.conf"], "rbd") {
		t.Errorf("glance without Ceph renders Ceph configuration")
	}
	if err := renderError("glance", storageSpec("ceph", "glance", map[string]any{"ceph": map[string]any{"monHost": ""}})); err == nil || !strings.Contains(err.Error(), "ceph.monHost is not set") {
		t.Errorf("glance with Ceph and no monitor: error = %v, want ceph.monHost is not set", err)
	}
}

// TestNovaCeph: with Ceph, nova-compute defines the libvirt secret (from client.cinder's
// Secret, never on a command line) before it starts and names it in [libvirt]; Nova finds
// Cinder in the catalog whatever the backend.
func TestNovaCeph(t *testing.T) {
	n, _, _ := renderNova(t, storageSpec("ceph", "nova", nil))
	pod := n.compute.Spec.Template.Spec
	var inits []string
	for _, c := range pod.InitContainers {
		inits = append(inits, c.Name)
	}
	if strings.Join(inits, ",") != "config-render,state-dirs,libvirt-secret,wait-conductor" {
		t.Fatalf("nova-compute init containers = %v, want config-render, state-dirs, libvirt-secret, wait-conductor", inits)
	}
	step := containerByName(pod.InitContainers, "libvirt-secret")
	script := strings.Join(step.Command, " ")
	for _, want := range []string{"<usage type='ceph'>", "private='yes'", "virsh -c qemu:///system secret-define", "secret-set-value --secret \"$LIBVIRT_SECRET_UUID\" --file /run/osd-secret/key"} {
		if !strings.Contains(script, want) {
			t.Errorf("libvirt-secret script lacks %q:\n%s", want, script)
		}
	}
	if strings.Contains(script, "--base64") {
		t.Errorf("libvirt-secret passes the key on virsh's command line")
	}
	for name, key := range map[string]string{"LIBVIRT_SECRET_UUID": "libvirt-uuid", "CEPH_CINDER_KEY": "key"} {
		if e := envByName(step, name); e == nil || e.ValueFrom.SecretKeyRef.Name != "ceph-client-cinder" || e.ValueFrom.SecretKeyRef.Key != key {
			t.Errorf("libvirt-secret %s = %+v, want Secret ceph-client-cinder key %s", name, e, key)
		}
	}
	var tmp *corev1.Volume
	for i := range pod.Volumes {
		if pod.Volumes[i].Name == "secret-tmp" {
			tmp = &pod.Volumes[i]
		}
	}
	if tmp == nil || tmp.EmptyDir == nil || tmp.EmptyDir.Medium != corev1.StorageMediumMemory {
		t.Errorf("secret-tmp volume = %+v, want an in-memory emptyDir", tmp)
	}
	conf, err := novaParseINI(n.secrets["nova-compute-config"].StringData["nova.conf"])
	if err != nil {
		t.Fatal(err)
	}
	if conf["libvirt"]["rbd_user"] != "cinder" || conf["libvirt"]["rbd_secret_uuid"] != "@@LIBVIRT_SECRET_UUID@@" || conf["libvirt"]["virt_type"] != "qemu" {
		t.Errorf("compute [libvirt] = %v, want rbd_user cinder, the secret's uuid, virt_type kept", conf["libvirt"])
	}
	render := containerByName(pod.InitContainers, "config-render")
	dir, values := runConfigRender(t, render, n.secrets["nova-compute-config"].StringData)
	b, _ := os.ReadFile(filepath.Join(dir, "nova.conf"))
	if !strings.Contains(string(b), "rbd_secret_uuid = "+values["LIBVIRT_SECRET_UUID"]) {
		t.Errorf("rendered compute nova.conf lacks the secret's uuid")
	}

	for _, backend := range []string{"ceph", "lvm"} {
		n, _, _ := renderNova(t, storageSpec(backend, "nova", nil))
		for secret, s := range n.secrets {
			c, _ := novaParseINI(s.StringData["nova.conf"])
			if c["cinder"]["catalog_info"] != "volumev3:cinderv3:internalURL" || c["cinder"]["password"] != "@@NOVA_KEYSTONE_PASSWORD@@" {
				t.Errorf("%s (%s) [cinder] = %v, want Cinder's internal endpoint as the nova user", secret, backend, c["cinder"])
			}
		}
	}
	lvm, _, _ := renderNova(t, storageSpec("lvm", "nova", nil))
	if containerByName(lvm.compute.Spec.Template.Spec.InitContainers, "libvirt-secret") != nil || strings.Contains(lvm.secrets["nova-compute-config"].StringData["nova.conf"], "rbd_") {
		t.Errorf("nova with lvm defines a libvirt secret or RBD settings")
	}
}
