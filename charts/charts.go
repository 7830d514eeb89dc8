// Package charts holds osd's Helm charts, embedded in the binary: the osd-lib library chart
// of shared templates and one chart per service. Load one with helmclient.LoadChart(FS, name).
package charts

import "embed"

// FS holds every chart directory at its top level.
//
//go:embed all:osd-lib all:coredns all:mariadb all:rabbitmq all:memcached all:keystone all:glance all:placement all:ovn all:neutron all:nova all:heat all:horizon all:ceph all:cinder
var FS embed.FS

// Library is the directory of the library chart (not installable by itself).
const Library = "osd-lib"
