// Package openstack owns osd's small OpenStack REST client (net/http only:
// Keystone v3 password auth with the service catalog, and the Nova, Glance,
// Neutron and Placement calls the daemon makes at run time: day-one in
// daemon/deployment, osd launch in daemon/launch, node removal and listings in
// daemon/members) and the day-one resources: flavors, the external and tenant
// networks, the router, the default security group's rules and the test images.
// Plan decides the operations from what is observed (pure, table-tested); Ensure
// observes, plans and applies them, idempotently by name.
package openstack
