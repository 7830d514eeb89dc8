// Package deploy owns the OpenStack deployment: the OpenStackDeployment custom resource
// (types, CRD manifest, client), the service catalog and its dependency plan, values
// layering, INI rendering, generated secrets, workload health, and the controller that
// converges Helm releases in dependency order. The controller runs for the daemon's whole
// life (daemon/deployment starts it), not only during `osd init`; helmclient is the one
// wrapper of the Helm SDK.
//
// Pure decisions (Merge, Render, RenderINI, Plan, WorkloadReason...) take values and return
// values; the Controller runs them against a cluster.
package deploy
