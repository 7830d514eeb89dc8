package api

// LaunchRequest is the body of POST /1.0/instances: a test server (every field optional;
// empty fields take the day-one defaults).
type LaunchRequest struct {
	Name    string `json:"name,omitempty"`    // default osd-test-<random>
	Flavor  string `json:"flavor,omitempty"`  // name or ID; default m1.tiny
	Image   string `json:"image,omitempty"`   // name or ID; default osd-test
	Network string `json:"network,omitempty"` // name or ID; default osd-net
	Key     string `json:"key,omitempty"`     // keypair; default osd-key
	NoWait  bool   `json:"no_wait,omitempty"` // return once Nova accepted the server
	// VolumeGB boots from a new Cinder volume of this many GiB made from the image
	// (osd launch --volume), deleted with the server; 0 boots from the image.
	VolumeGB int `json:"volume_gb,omitempty"`
}

// LaunchResult is the result of a launch operation: where the server is and how to
// reach it, or why it cannot be reached.
type LaunchResult struct {
	Name       string   `json:"name"`
	ID         string   `json:"id"`
	Status     string   `json:"status"`
	Host       string   `json:"host,omitempty"`
	Key        string   `json:"key,omitempty"` // keypair
	FixedIP    string   `json:"fixed_ip,omitempty"`
	FloatingIP string   `json:"floating_ip,omitempty"`
	Reachable  bool     `json:"reachable"`
	Reach      string   `json:"reach,omitempty"`       // how to reach it
	SSH        string   `json:"ssh,omitempty"`         // the ssh command that logs in
	Login      string   `json:"login,omitempty"`       // the console login of the test image
	ConsoleURL string   `json:"console_url,omitempty"` // noVNC, when Nova gives one
	Diagnosis  []string `json:"diagnosis,omitempty"`   // why it is not reachable
	ActiveIn   string   `json:"active_in,omitempty"`   // create -> ACTIVE
	PingIn     string   `json:"ping_in,omitempty"`     // create -> first ping answer
	SSHIn      string   `json:"ssh_in,omitempty"`      // create -> first SSH login
	Metadata   string   `json:"metadata,omitempty"`    // what the guest got from the metadata service
	// Profile is where the time from create to the first ping went, in order (what
	// could be measured: Nova's action events, the guest's own uptime on its console).
	Profile []LaunchPhase `json:"profile,omitempty"`
}

// LaunchPhase is one part of a launch's time.
type LaunchPhase struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
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
