package images

import (
	"encoding/binary"
	"os"
)

// Fixed service IDs. nova, cinder and glance use the IDs Debian reserves
// for them (its packages create them with these); the others are fixed in
// the system range (100-999) so that `adduser --system` in the packages'
// maintainer scripts accepts the existing accounts. Charts use these as
// runAsUser/fsGroup.
const (
	UIDNova        = 64060
	UIDCinder      = 64061
	UIDGlance      = 64062
	UIDKeystone    = 901
	UIDNeutron     = 902
	UIDPlacement   = 903
	UIDHeat        = 904
	UIDHorizon     = 905
	UIDMySQL       = 910
	UIDRabbitMQ    = 911
	UIDMemcache    = 912
	UIDLibvirtQemu = 920
	GIDKVM         = 921
	GIDLibvirt     = 922
	UIDLibvirtDNS  = 923
	UIDCoreDNS     = 65532
	UIDCeph        = 64045 // Debian's reserved id for ceph
	// DefaultSuite is the Debian suite of the default release's images.
	DefaultSuite   = "bookworm"
	defaultVariant = "minbase"
	corednsVersion = "v1.12.3"
	imageRefPrefix = "localhost/osd/"
	// OpenStackRelease is the default release's name (Release, DefaultReleaseName): Debian
	// 12's (bookworm's) packages are Zed (keystone 22, nova 26, neutron 21, ...).
	OpenStackRelease = DefaultReleaseName
	// BaseImage and CommonImage are the shared lower layers (see Recipes).
	BaseImage   = "base"
	CommonImage = "openstack-common"
)

// vfsCapNetBindService is a VFS_CAP_REVISION_2 security.capability value:
// cap_net_bind_service (bit 10) permitted and effective.
func vfsCapNetBindService() string {
	b := make([]byte, 20)
	binary.LittleEndian.PutUint32(b[0:], 0x02000000|1)
	binary.LittleEndian.PutUint32(b[4:], 1<<10)
	return string(b)
}

func svcUser(name string, id int, shell string) User {
	return User{Name: name, UID: id, GID: id, Home: "/var/lib/" + name, Shell: shell}
}

// Recipes returns the catalog of every image osd runs, in build order (an image after
// the image it is layered on).
//
// The Debian images are layered: "base" (minbase with the tools and libraries most
// images use) is the lowest layer of every Debian image, and "openstack-common" (the
// Python OpenStack libraries the control plane and compute both run: nova's, oslo,
// the clients) sits between it and the openstack and compute images. Each image adds
// one layer of its own, so a changed recipe rebuilds only its own layer (and those
// of the images layered on it), and containerd stores and unpacks each shared layer
// once.
func Recipes() []Recipe { return RecipesFor(DefaultRelease()) }

// RecipesFor returns the catalog of rel: every Debian image built from rel's suite and
// tagged with rel's name and suite (the base image with the suite alone); the pause and
// CoreDNS images are the same for every release.
func RecipesFor(rel Release) []Recipe {
	suite, imageRefVersion := rel.Suite, ":"+rel.Name+"-"+rel.Suite
	return []Recipe{
		{
			Name: "pause", Ref: PauseRef, Kind: KindPause,
			Entrypoint: []string{"/pause"}, User: "65535:65535",
		},
		{
			Name: "coredns", Ref: imageRefPrefix + "coredns:" + corednsVersion, Kind: KindGo,
			Go: &GoBuild{Module: "github.com/coredns/coredns", Version: corednsVersion, Binary: "/coredns",
				// cap_net_bind_service+ep: port 53 as a non-root user (ignored
				// under no_new_privs; the image's default user is root).
				Xattrs: map[string]string{"security.capability": vfsCapNetBindService()}},
			Entrypoint: []string{"/coredns"},
			Files: []File{
				{Path: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\ncoredns:x:65532:65532:coredns:/nonexistent:/sbin/nologin\n")},
				{Path: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\ncoredns:x:65532:\n")},
				{Path: "etc/coredns", Mode: os.ModeDir | 0o755},
				{Path: "tmp", Mode: os.ModeDir | os.ModeSticky | 0o777},
			},
		},
		{
			Name: BaseImage, Ref: imageRefPrefix + BaseImage + ":" + suite, Kind: KindDebian,
			Suite: suite, Variant: defaultVariant,
			Packages: []string{"ca-certificates", "iproute2", "procps", "python3"},
			Cmd:      []string{"/bin/bash"},
			Env:      []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"},
		},
		{
			Name: CommonImage, Ref: imageRefPrefix + CommonImage + imageRefVersion, Kind: KindDebian,
			Suite: suite, Base: BaseImage,
			// python3-nova brings oslo, keystoneauth, os-brick, os-vif, ovsdbapp and the
			// Ceph client libraries; the clients and drivers every service's Jobs use.
			Packages: []string{"nova-common", "python3-nova", "python3-openstackclient", "python3-keystoneclient",
				"python3-pymysql", "python3-memcache", "python3-rbd", "python3-rados"},
			Users: []User{svcUser("nova", UIDNova, "/bin/sh")},
			// udev (through open-iscsi) makes the kvm group in this layer; compute, above
			// it, needs it at GIDKVM, so it is fixed here (compute adds its members).
			Groups:  []Group{{Name: "kvm", GID: GIDKVM}},
			Debconf: []string{"nova-common nova/configure_db boolean false", "nova-common nova/configure_rabbit boolean false", "nova-common nova/configure_ksat boolean false"},
			// open-iscsi's postinst makes a random initiator name (per host).
			Exclude: []string{"etc/iscsi/initiatorname.iscsi"},
			Cmd:     []string{"/bin/bash"},
			Env:     []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"},
		},
		{
			Name: "openstack", Ref: imageRefPrefix + "openstack" + imageRefVersion, Kind: KindDebian,
			Suite: suite, Base: CommonImage,
			Packages: []string{
				"keystone", "python3-keystoneclient",
				"glance-api", "glance-common",
				"placement-api", "python3-osc-placement",
				"nova-api", "nova-conductor", "nova-scheduler", "nova-consoleproxy", "novnc",
				"neutron-server", "neutron-ovn-metadata-agent", "python3-neutron", "haproxy", "openvswitch-common", // haproxy: the metadata proxy in each ovnmeta namespace; ovsdb-client: neutron deletes MAC bindings with it
				"cinder-api", "cinder-scheduler", "cinder-volume", "cinder-backup",
				// Ceph clients: the RBD driver, backup driver and Glance store speak librbd from Python; Cinder also runs the rbd CLI (image import).
				"ceph-common", "python3-rbd", "python3-rados",
				"heat-api", "heat-api-cfn", "heat-engine",
				"openstack-dashboard", "openstack-dashboard-apache",
				"python3-openstackclient", "python3-pymysql", "python3-memcache", "mariadb-client",
				"uwsgi-core", "uwsgi-plugin-python3", "ca-certificates", "iproute2", "procps", "lvm2", "thin-provisioning-tools",
				// cinder-backup asks os-brick for the host's connector properties: its NVMe-oF
				// part reads the DMI uuid from sysfs, else runs dmidecode, and fails on a host
				// without a DMI table (virtual machines without SMBIOS) when there is none.
				"dmidecode",
			},
			Groups: []Group{},
			Users: []User{
				svcUser("keystone", UIDKeystone, "/bin/sh"),
				svcUser("glance", UIDGlance, "/bin/sh"),
				svcUser("placement", UIDPlacement, "/bin/sh"),
				svcUser("nova", UIDNova, "/bin/sh"),
				svcUser("neutron", UIDNeutron, "/bin/sh"),
				svcUser("cinder", UIDCinder, "/bin/sh"),
				svcUser("heat", UIDHeat, "/bin/sh"),
				svcUser("horizon", UIDHorizon, "/bin/sh"),
			},
			Debconf: openstackDebconf(),
			Files: []File{
				{Path: "etc/default/nova-consoleproxy", Mode: 0o644, Data: []byte("NOVA_CONSOLE_PROXY_TYPE=novnc\n")},
			},
			// fontconfig caches carry build times.
			Exclude: []string{"var/cache/fontconfig/*"},
			Cmd:     []string{"/bin/bash"},
			Env:     []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"},
		},
		{
			Name: "compute", Ref: imageRefPrefix + "compute" + imageRefVersion, Kind: KindDebian,
			Suite: suite, Base: CommonImage,
			Packages: []string{
				"nova-compute", "nova-compute-kvm", "libvirt-daemon-system", "libvirt-daemon-driver-qemu",
				"qemu-system-x86", "qemu-utils", "python3-libvirt", "ovmf", "ca-certificates", "iproute2", "procps",
				"genisoimage", // config drives (Nova's mkisofs_cmd)
			},
			Groups: []Group{{Name: "kvm", GID: GIDKVM}, {Name: "libvirt", GID: GIDLibvirt}},
			Users: []User{
				{Name: "nova", UID: UIDNova, GID: UIDNova, Home: "/var/lib/nova", Shell: "/bin/sh", Groups: []string{"kvm", "libvirt"}},
				{Name: "libvirt-qemu", UID: UIDLibvirtQemu, GID: UIDLibvirtQemu, Home: "/var/lib/libvirt", Shell: "/usr/sbin/nologin", Groups: []string{"kvm"}},
				{Name: "libvirt-dnsmasq", UID: UIDLibvirtDNS, GID: UIDLibvirtDNS, Home: "/var/lib/libvirt/dnsmasq", Shell: "/usr/sbin/nologin"},
			},
			Debconf: []string{"nova-common nova/configure_db boolean false", "nova-common nova/configure_rabbit boolean false", "nova-common nova/configure_ksat boolean false"},
			Cmd:     []string{"/bin/bash"},
			Env:     []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"},
		},
		cephRecipe(suite, imageRefVersion),
		{
			Name: "ovn", Ref: imageRefPrefix + "ovn" + imageRefVersion, Kind: KindDebian,
			Suite: suite, Base: BaseImage,
			Packages: []string{"ovn-central", "ovn-host", "openvswitch-switch", "iproute2", "procps"},
			Cmd:      []string{"/bin/bash"},
			Env:      []string{"PATH=/usr/share/openvswitch/scripts:/usr/share/ovn/scripts:/usr/sbin:/usr/bin:/sbin:/bin"},
		},
		{
			Name: "mariadb", Ref: imageRefPrefix + "mariadb" + imageRefVersion, Kind: KindDebian,
			Suite: suite, Base: BaseImage,
			Packages: []string{"mariadb-server", "mariadb-client"},
			// The package initializes a datadir at install; the chart does it
			// on the volume at deploy time.
			Exclude: []string{"var/lib/mysql/*"},
			Users:   []User{{Name: "mysql", UID: UIDMySQL, GID: UIDMySQL, Home: "/nonexistent", Shell: "/bin/false"}},
			Cmd:     []string{"/usr/sbin/mariadbd"},
			User:    "mysql",
			Env:     []string{"LANG=C.UTF-8"},
		},
		{
			Name: "rabbitmq", Ref: imageRefPrefix + "rabbitmq" + imageRefVersion, Kind: KindDebian,
			Suite: suite, Base: BaseImage,
			Packages: []string{"rabbitmq-server"},
			// The Erlang cookie is a cluster secret the postinst generates:
			// each deployment makes its own.
			Exclude: []string{"var/lib/rabbitmq/.erlang.cookie"},
			Users:   []User{{Name: "rabbitmq", UID: UIDRabbitMQ, GID: UIDRabbitMQ, Home: "/var/lib/rabbitmq", Shell: "/bin/sh"}},
			Cmd:     []string{"/usr/sbin/rabbitmq-server"},
			User:    "rabbitmq",
			Env:     []string{"LANG=C.UTF-8", "HOME=/var/lib/rabbitmq"},
		},
		{
			Name: "memcached", Ref: imageRefPrefix + "memcached" + imageRefVersion, Kind: KindDebian,
			Suite: suite, Base: BaseImage,
			Packages:   []string{"memcached"},
			Users:      []User{{Name: "memcache", UID: UIDMemcache, GID: UIDMemcache, Home: "/nonexistent", Shell: "/bin/false"}},
			Entrypoint: []string{"/usr/bin/memcached"},
			Cmd:        []string{"-u", "memcache", "-m", "64", "-p", "11211"},
			User:       "memcache",
		},
	}
}

// openstackDebconf answers the dbconfig/rabbit/keystone questions of the
// OpenStack packages with "do not configure": the charts render the
// configuration at deploy time.
func openstackDebconf() []string {
	var out []string
	for _, p := range []string{"keystone", "glance-common", "placement-common", "nova-common", "neutron-common", "cinder-common", "heat-common"} {
		svc := p
		if n := len(p) - len("-common"); n > 0 && p[n:] == "-common" {
			svc = p[:n]
		}
		out = append(out,
			p+" "+svc+"/configure_db boolean false",
			p+" "+svc+"/configure_rabbit boolean false",
			p+" "+svc+"/configure_ksat boolean false",
			p+" "+svc+"/configure_api-endpoint boolean false",
		)
	}
	out = append(out, "keystone keystone/create-admin-tenant boolean false")
	return out
}

// RecipeByName returns the default release's catalog recipe called name.
func RecipeByName(name string) (Recipe, bool) { return RecipeIn(DefaultRelease(), name) }

// RecipeIn returns rel's catalog recipe called name.
func RecipeIn(rel Release, name string) (Recipe, bool) {
	for _, r := range RecipesFor(rel) {
		if r.Name == name {
			return r, true
		}
	}
	return Recipe{}, false
}
