// Package helmclient is osd's thin wrapper over the Helm SDK (helm.sh/helm/v3/pkg/action):
// one action.Configuration per namespace, one small function per verb (Apply = install or
// upgrade, Get, Uninstall, Template), charts loaded from an fs.FS (the embedded charts), and a
// RESTClientGetter built from a rest.Config instead of a kubeconfig file.
package helmclient
