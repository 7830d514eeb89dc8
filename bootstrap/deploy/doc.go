// Package deploy owns the OpenStack deployment: the OpenStackDeployment custom resource
// (types, CRD manifest, client), the service catalog and its dependency plan, values
// layering, INI rendering, generated secrets, workload health, and the controller that
// converges Helm releases in dependency order.
//
// Pure decisions (Merge, Render, RenderINI, Plan, WorkloadReason...) take values and return
// values; the Controller runs them against a cluster.
package deploy
