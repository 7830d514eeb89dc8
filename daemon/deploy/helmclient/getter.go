package helmclient

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// RESTGetter adapts a rest.Config (from the embedded k3s, no kubeconfig file needed) to
// genericclioptions.RESTClientGetter with a fixed default namespace.
type RESTGetter struct {
	Config    *rest.Config
	Namespace string

	mu        sync.Mutex
	discovery discovery.CachedDiscoveryInterface
}

var _ genericclioptions.RESTClientGetter = (*RESTGetter)(nil)

// ToRESTConfig returns a copy of the config.
func (g *RESTGetter) ToRESTConfig() (*rest.Config, error) {
	return rest.CopyConfig(g.Config), nil
}

// ToDiscoveryClient returns a memory-cached discovery client (shared by this getter).
func (g *RESTGetter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.discovery != nil {
		return g.discovery, nil
	}
	cfg := rest.CopyConfig(g.Config)
	if cfg.Burst < 100 {
		cfg.Burst = 100 // discovery walks every group
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	g.discovery = memory.NewMemCacheClient(dc)
	return g.discovery, nil
}

// ToRESTMapper returns a mapper that refreshes discovery when a kind is unknown (new CRDs).
func (g *RESTGetter) ToRESTMapper() (meta.RESTMapper, error) {
	dc, err := g.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	m := restmapper.NewDeferredDiscoveryRESTMapper(dc)
	return restmapper.NewShortcutExpander(m, dc, nil), nil
}

// ToRawKubeConfigLoader returns a ClientConfig that yields the rest.Config and namespace.
func (g *RESTGetter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	return fixedClientConfig{g: g}
}

type fixedClientConfig struct{ g *RESTGetter }

func (c fixedClientConfig) RawConfig() (clientcmdapi.Config, error) {
	return clientcmdapi.Config{}, nil
}

func (c fixedClientConfig) ClientConfig() (*rest.Config, error) { return c.g.ToRESTConfig() }

func (c fixedClientConfig) Namespace() (string, bool, error) {
	if c.g.Namespace == "" {
		return "default", false, nil
	}
	return c.g.Namespace, true, nil
}

func (c fixedClientConfig) ConfigAccess() clientcmd.ConfigAccess {
	return clientcmd.NewDefaultClientConfigLoadingRules()
}
