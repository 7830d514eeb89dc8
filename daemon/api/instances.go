package api

// LaunchRequest is the body of POST /1.0/instances: a test server (every field optional).
type LaunchRequest struct {
	Name    string `json:"name,omitempty"`    // default osd-test-<random>
	Flavor  string `json:"flavor,omitempty"`  // default m1.tiny
	Image   string `json:"image,omitempty"`   // default osd-test
	Network string `json:"network,omitempty"` // default osd-net
	NoWait  bool   `json:"no_wait,omitempty"` // return once Nova accepted the server
}

// LaunchResult is the result of a launch operation: where the server is and how to
// reach it, or why it cannot be reached.
type LaunchResult struct {
	Name       string   `json:"name"`
	ID         string   `json:"id"`
	Status     string   `json:"status"`
	Host       string   `json:"host,omitempty"`
	FixedIP    string   `json:"fixed_ip,omitempty"`
	FloatingIP string   `json:"floating_ip,omitempty"`
	Reachable  bool     `json:"reachable"`
	Reach      string   `json:"reach,omitempty"`
	ConsoleURL string   `json:"console_url,omitempty"`
	Diagnosis  []string `json:"diagnosis,omitempty"`
	ActiveIn   string   `json:"active_in,omitempty"`
	PingIn     string   `json:"ping_in,omitempty"`
	Metadata   string   `json:"metadata,omitempty"`
}

// Instance is one server as GET /1.0/instances lists it.
type Instance struct {
	Name       string `json:"name"`
	ID         string `json:"id"`
	Status     string `json:"status"`
	FixedIP    string `json:"fixed_ip,omitempty"`
	FloatingIP string `json:"floating_ip,omitempty"`
	Fault      string `json:"fault,omitempty"`
}
