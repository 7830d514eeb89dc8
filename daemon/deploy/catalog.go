package deploy

import (
	"fmt"
	"sort"
)

// Service is one Helm release in the catalog.
type Service struct {
	Name      string   // release name and key in spec.services / status.children
	Chart     string   // chart directory in the embedded charts FS
	Namespace string   // namespace the release is installed into
	DependsOn []string // services that must be Ready first
	Enabled   bool     // enabled unless spec.services[name].enabled says otherwise
	Images    []string // image names (keys of spec.images) the chart uses
	// Ports are the service's NodePorts: the one place they are decided. The daemon
	// sets each in the chart's values and builds the public endpoints from them.
	Ports []Port
}

// Port is one NodePort of a service.
type Port struct {
	Name     string // "public" for the service's API; others by what they serve
	NodePort int
	Values   string // dotted path of the NodePort in the chart's values
	Path     string // path of the public URL after host:port ("/v3", "/v2.1", "/horizon")
	// Probe is the path osd GETs to tell that the port answers, when not Path: Horizon's
	// is a static file apache serves, so that the check does not load the dashboard's
	// Django, which is dropped when idle (its pod proves Django once when it starts).
	Probe string
}

// ProbeUserAgent is the User-Agent of osd's GETs of ProbePath. A service started on demand
// answers a request from it (as one from the kubelet's kube-probe/) without starting:
// heat-server's gate (charts/heat/files/heat-server.py) starts Heat only for other requests.
const ProbeUserAgent = "osd-probe"

// ProbePath is the path osd GETs to tell that the port answers: Probe, else Path.
func (p Port) ProbePath() string {
	if p.Probe != "" {
		return p.Probe
	}
	return p.Path
}

// Port returns the service's port called name.
func (s Service) Port(name string) (Port, bool) {
	for _, p := range s.Ports {
		if p.Name == name {
			return p, true
		}
	}
	return Port{}, false
}

// Catalog is the set of services osd knows and their dependency DAG.
type Catalog struct {
	Services []Service
}

// Namespace is where the OpenStackDeployment, the Helm release records and the OpenStack
// workloads live.
const Namespace = "openstack"

// DefaultCatalog is osd's service DAG: each service depends only on what it uses to
// install and start (DNS for the service names, its database and caches, RabbitMQ for
// those with RPC, OVN's databases for Neutron, Placement for Nova's computes). Keystone
// is none of that for the other services: their init Jobs' database steps do not need
// it, their registration step waits (up to five minutes) until Keystone issues tokens,
// and their APIs start without it; so after the infrastructure every API service
// installs side by side with Keystone, and Nova follows Placement (which is Ready only
// once registered, so once Keystone answers). What a service calls only when a user
// asks (Nova calling Neutron or Glance for a server, Heat calling Nova, Horizon's pages)
// is no dependency either. Ceph and Cinder are
// disabled by default: the daemon enables them for the storage backend it chose (Ceph only
// for features.storage ceph, Cinder for ceph or lvm). Their edges are only what they need
// to install: Glance and Cinder store into Ceph (an edge to a disabled service is ignored,
// so with lvm they do not wait for it), Cinder registers in Keystone; nothing waits for
// Cinder (Nova and Heat call it only when a user asks for a volume).
func DefaultCatalog() Catalog {
	return Catalog{Services: []Service{
		{Name: "coredns", Chart: "coredns", Namespace: "kube-system", Enabled: true, Images: []string{"coredns"}},
		{Name: "mariadb", Chart: "mariadb", Namespace: Namespace, Enabled: true, Images: []string{"mariadb"}},
		{Name: "rabbitmq", Chart: "rabbitmq", Namespace: Namespace, Enabled: true, Images: []string{"rabbitmq"}},
		{Name: "memcached", Chart: "memcached", Namespace: Namespace, Enabled: true, Images: []string{"memcached"}},
		{Name: "keystone", Chart: "keystone", Namespace: Namespace, DependsOn: []string{"coredns", "mariadb", "memcached"}, Enabled: true, Images: []string{"openstack"},
			Ports: []Port{{Name: "public", NodePort: KeystoneNodePort, Values: "service.nodePort", Path: "/v3"}}},
		{Name: "ceph", Chart: "ceph", Namespace: Namespace, Images: []string{"ceph"}},
		{Name: "glance", Chart: "glance", Namespace: Namespace, DependsOn: []string{"coredns", "mariadb", "memcached", "ceph"}, Enabled: true, Images: []string{"openstack"},
			Ports: []Port{{Name: "public", NodePort: 30292, Values: "service.nodePort"}}},
		{Name: "placement", Chart: "placement", Namespace: Namespace, DependsOn: []string{"coredns", "mariadb", "memcached"}, Enabled: true, Images: []string{"openstack"},
			Ports: []Port{{Name: "public", NodePort: 30778, Values: "service.nodePort"}}},
		{Name: "ovn", Chart: "ovn", Namespace: Namespace, Enabled: true, Images: []string{"ovn"}},
		{Name: "neutron", Chart: "neutron", Namespace: Namespace, DependsOn: []string{"coredns", "mariadb", "memcached", "rabbitmq", "ovn"}, Enabled: true, Images: []string{"openstack"},
			Ports: []Port{{Name: "public", NodePort: 30696, Values: "service.nodePort"}}},
		{Name: "nova", Chart: "nova", Namespace: Namespace, DependsOn: []string{"rabbitmq", "placement"}, Enabled: true, Images: []string{"openstack", "compute"},
			Ports: []Port{{Name: "public", NodePort: 30774, Values: "service.nodePort", Path: "/v2.1"},
				{Name: "novnc", NodePort: 30680, Values: "novncproxy.service.nodePort", Path: "/vnc_lite.html"}}},
		{Name: "cinder", Chart: "cinder", Namespace: Namespace, DependsOn: []string{"keystone", "rabbitmq", "ceph"}, Images: []string{"openstack"},
			Ports: []Port{{Name: "public", NodePort: 30776, Values: "service.nodePort"}}},
		{Name: "heat", Chart: "heat", Namespace: Namespace, DependsOn: []string{"coredns", "mariadb", "memcached", "rabbitmq"}, Enabled: true, Images: []string{"openstack"},
			Ports: []Port{{Name: "public", NodePort: 30004, Values: "service.nodePorts.api"}, {Name: "cfn", NodePort: 30000, Values: "service.nodePorts.cfn"}}},
		{Name: "horizon", Chart: "horizon", Namespace: Namespace, DependsOn: []string{"coredns", "memcached"}, Enabled: true, Images: []string{"openstack"},
			Ports: []Port{{Name: "public", NodePort: 30080, Values: "service.nodePort", Path: "/horizon", Probe: "/horizon/static/dashboard/img/favicon.ico"}}},
	}}
}

// Service returns the named service.
func (c Catalog) Service(name string) (Service, bool) {
	for _, s := range c.Services {
		if s.Name == name {
			return s, true
		}
	}
	return Service{}, false
}

// Levels validates the catalog and returns its services in dependency levels: level 0
// depends on nothing, level n only on lower levels. Names within a level are sorted.
// It refuses duplicate names, unknown dependencies and cycles.
func (c Catalog) Levels() ([][]string, error) {
	deps := map[string][]string{}
	for _, s := range c.Services {
		if s.Name == "" {
			return nil, fmt.Errorf("catalog: service without a name")
		}
		if _, dup := deps[s.Name]; dup {
			return nil, fmt.Errorf("catalog: service %q listed twice", s.Name)
		}
		deps[s.Name] = s.DependsOn
	}
	for name, ds := range deps {
		for _, d := range ds {
			if _, ok := deps[d]; !ok {
				return nil, fmt.Errorf("catalog: %s depends on unknown service %q", name, d)
			}
		}
	}
	level := map[string]int{}
	var levels [][]string
	for len(level) < len(deps) {
		var next []string
		for name, ds := range deps {
			if _, done := level[name]; done {
				continue
			}
			ok := true
			for _, d := range ds {
				if l, done := level[d]; !done || l == len(levels) {
					ok = false
					break
				}
			}
			if ok {
				next = append(next, name)
			}
		}
		if len(next) == 0 {
			var stuck []string
			for name := range deps {
				if _, done := level[name]; !done {
					stuck = append(stuck, name)
				}
			}
			sort.Strings(stuck)
			return nil, fmt.Errorf("catalog: dependency cycle among %v", stuck)
		}
		sort.Strings(next)
		for _, n := range next {
			level[n] = len(levels)
		}
		levels = append(levels, next)
	}
	return levels, nil
}
