package deployment

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/deploy"
	"github.com/osdcloud/osd/daemon/openstack"
)

// probeTimeout bounds one public endpoint probe; probeCache how long its answer is reused.
const (
	probeTimeout = 3 * time.Second
	probeCache   = 5 * time.Second
)

// answers remembers the last probe of each public endpoint.
type answers struct {
	mu   sync.Mutex
	at   time.Time
	last map[string]string // service -> why it does not answer ("" when it does)
}

// Answering probes the public endpoint of every enabled service that has one and says,
// per service, why it does not answer ("" when it does): what is true now, whatever the
// cluster recorded. Any HTTP answer below 500 counts (an API asking for a token answers).
func (s *Service) Answering(ctx context.Context, services []string) map[string]string {
	s.answers.mu.Lock()
	defer s.answers.mu.Unlock()
	if time.Since(s.answers.at) < probeCache && s.answers.last != nil {
		return s.answers.last
	}
	out := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	hc := &http.Client{Timeout: probeTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, name := range services {
		url := s.probeURL(name, "public")
		if url == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			why := probe(ctx, hc, url)
			mu.Lock()
			out[name] = why
			mu.Unlock()
		}()
	}
	wg.Wait()
	s.answers.at, s.answers.last = time.Now(), out
	return out
}

func probe(ctx context.Context, hc *http.Client, url string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err.Error()
	}
	req.Header.Set("User-Agent", deploy.ProbeUserAgent)
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Sprintf("%s does not answer: %v", url, err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Sprintf("%s answers %s", url, resp.Status)
	}
	return ""
}

// MarkUnanswered turns every release the cluster reports ready but whose public endpoint
// does not answer into unavailable, with the reason (pure).
func MarkUnanswered(st api.DeploymentStatus, why map[string]string) api.DeploymentStatus {
	for name, ch := range st.Children {
		if w := why[name]; w != "" && ch.State == api.ReleaseReady {
			ch.State, ch.Message = api.ReleaseUnavailable, w
			st.Children[name] = ch
		}
	}
	return st
}

// untilAnswering waits until every enabled service with a public endpoint answers and
// Keystone gives the admin a token: the cloud is up now, not only as recorded.
func (s *Service) untilAnswering(ctx context.Context, services []string, detail func(string)) error {
	for {
		why := s.Answering(ctx, services)
		var not []string
		for _, name := range services {
			if w := why[name]; w != "" {
				not = append(not, w)
			}
		}
		sort.Strings(not)
		if len(not) == 0 {
			creds, err := s.AdminCredentials()
			if err == nil {
				if c := s.loggedIn.get(creds); c != nil && c.Check(ctx) == nil {
					return nil
				}
				var c *openstack.Client
				if c, err = openstack.Authenticate(ctx, creds); err == nil {
					s.loggedIn.put(c)
					return nil
				}
			}
			not = append(not, "Keystone token: "+err.Error())
		}
		detail("waiting for the services to answer: " + strings.Join(not, "; "))
		select {
		case <-ctx.Done():
			return fmt.Errorf("the cloud does not answer: %s: %w", strings.Join(not, "; "), ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
}

// enabledServices are the services spec enables, in catalog order.
func enabledServices(spec deploy.DeploymentSpec) []string {
	var out []string
	for _, svc := range deploy.DefaultCatalog().Services {
		if spec.ServiceEnabled(svc) {
			out = append(out, svc.Name)
		}
	}
	return out
}
