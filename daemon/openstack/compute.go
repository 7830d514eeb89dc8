package openstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Flavor is a Nova flavor.
type Flavor struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	VCPUs    int    `json:"vcpus"`
	RAM      int    `json:"ram"`  // MiB
	Disk     int    `json:"disk"` // GB
	IsPublic bool   `json:"os-flavor-access:is_public"`
}

// ListFlavors lists public and private flavors.
func (c *Client) ListFlavors(ctx context.Context) ([]Flavor, error) {
	var out struct {
		Flavors []Flavor `json:"flavors"`
	}
	err := c.do(ctx, "GET", compute, "flavors/detail", url.Values{"is_public": {"None"}}, nil, &out)
	return out.Flavors, err
}

// CreateFlavor creates a public flavor.
func (c *Client) CreateFlavor(ctx context.Context, name string, vcpus, ramMiB, diskGB int) (Flavor, error) {
	var out struct {
		Flavor Flavor `json:"flavor"`
	}
	body := map[string]any{"flavor": map[string]any{"name": name, "vcpus": vcpus, "ram": ramMiB, "disk": diskGB, "os-flavor-access:is_public": true}}
	err := c.do(ctx, "POST", compute, "flavors", nil, body, &out)
	return out.Flavor, err
}

// Server is a Nova server as GET /servers/{id} answers it.
type Server struct {
	ID        string                     `json:"id"`
	Name      string                     `json:"name"`
	Status    string                     `json:"status"` // BUILD, ACTIVE, ERROR, ...
	TaskState string                     `json:"OS-EXT-STS:task_state"`
	Host      string                     `json:"OS-EXT-SRV-ATTR:host"`
	Addresses map[string][]ServerAddress `json:"addresses"`
	Fault     *ServerFault               `json:"fault"`
	Created   time.Time                  `json:"created"`
}

// ServerAddress is one address of a server on a network.
type ServerAddress struct {
	Addr    string `json:"addr"`
	Type    string `json:"OS-EXT-IPS:type"` // fixed or floating
	MAC     string `json:"OS-EXT-IPS-MAC:mac_addr"`
	Version int    `json:"version"`
}

// ServerFault is why a server went to ERROR.
type ServerFault struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Details string `json:"details"`
}

// ServerRequest is what CreateServer needs.
type ServerRequest struct {
	Name      string
	ImageID   string
	FlavorID  string
	NetworkID string
	KeyName   string // keypair, "" for none
	// ConfigDrive asks for a config drive (the metadata on a disk, label config-2).
	ConfigDrive bool
	// BootVolumeGB boots from a new volume of this size made from ImageID (deleted with
	// the server) instead of a local disk; 0 boots from the image.
	BootVolumeGB int
}

// CreateServer asks Nova for a server; it answers with its ID at once.
func (c *Client) CreateServer(ctx context.Context, r ServerRequest) (Server, error) {
	var out struct {
		Server Server `json:"server"`
	}
	server := map[string]any{
		"name": r.Name, "imageRef": r.ImageID, "flavorRef": r.FlavorID,
		"networks": []map[string]string{{"uuid": r.NetworkID}},
	}
	if r.KeyName != "" {
		server["key_name"] = r.KeyName
	}
	if r.ConfigDrive {
		server["config_drive"] = true
	}
	if r.BootVolumeGB > 0 {
		server["imageRef"] = ""
		server["block_device_mapping_v2"] = []map[string]any{{"boot_index": 0, "uuid": r.ImageID, "source_type": "image",
			"destination_type": "volume", "volume_size": r.BootVolumeGB, "delete_on_termination": true}}
	}
	body := map[string]any{"server": server}
	if err := c.do(ctx, "POST", compute, "servers", nil, body, &out); err != nil {
		return Server{}, err
	}
	out.Server.Name = r.Name
	return out.Server, nil
}

// GetServer returns a server, with its fault when it is in ERROR.
func (c *Client) GetServer(ctx context.Context, id string) (Server, error) {
	var out struct {
		Server Server `json:"server"`
	}
	err := c.do(ctx, "GET", compute, "servers/"+url.PathEscape(id), nil, nil, &out)
	return out.Server, err
}

// ListServers lists the project's servers (all projects' when all is true), with details.
func (c *Client) ListServers(ctx context.Context, all bool) ([]Server, error) {
	var out struct {
		Servers []Server `json:"servers"`
	}
	q := url.Values{}
	if all {
		q.Set("all_tenants", "1")
	}
	err := c.do(ctx, "GET", compute, "servers/detail", q, nil, &out)
	return out.Servers, err
}

// DeleteServer deletes a server (a missing one is not an error).
func (c *Client) DeleteServer(ctx context.Context, id string) error {
	err := c.do(ctx, "DELETE", compute, "servers/"+url.PathEscape(id), nil, nil, nil)
	if IsNotFound(err) {
		return nil
	}
	return err
}

// ConsoleOutput returns the last lines of a server's console log (all when lines is 0).
func (c *Client) ConsoleOutput(ctx context.Context, id string, lines int) (string, error) {
	var out struct {
		Output string `json:"output"`
	}
	arg := map[string]any{}
	if lines > 0 {
		arg["length"] = lines
	}
	err := c.do(ctx, "POST", compute, "servers/"+url.PathEscape(id)+"/action", nil, map[string]any{"os-getConsoleOutput": arg}, &out)
	return out.Output, err
}

// ConsoleURL returns the noVNC URL of a server's console.
func (c *Client) ConsoleURL(ctx context.Context, id string) (string, error) {
	var out struct {
		RemoteConsole struct {
			URL string `json:"url"`
		} `json:"remote_console"`
	}
	body := map[string]any{"remote_console": map[string]string{"protocol": "vnc", "type": "novnc"}}
	if err := c.do(ctx, "POST", compute, "servers/"+url.PathEscape(id)+"/remote-consoles", nil, body, &out); err != nil {
		return "", err
	}
	if out.RemoteConsole.URL == "" {
		return "", fmt.Errorf("nova answered no console URL")
	}
	return out.RemoteConsole.URL, nil
}

// ComputeService is one row of Nova's os-services for a nova-compute.
type ComputeService struct {
	ID             json.RawMessage `json:"id"` // an integer before microversion 2.53
	Host           string          `json:"host"`
	Binary         string          `json:"binary"`
	Status         string          `json:"status"` // enabled | disabled
	State          string          `json:"state"`  // up | down
	DisabledReason string          `json:"disabled_reason"`
}

// ComputeServices lists the nova-compute services on host ("" = every host).
func (c *Client) ComputeServices(ctx context.Context, host string) ([]ComputeService, error) {
	var out struct {
		Services []ComputeService `json:"services"`
	}
	q := url.Values{"binary": {"nova-compute"}}
	if host != "" {
		q.Set("host", host)
	}
	err := c.do(ctx, "GET", compute, "os-services", q, nil, &out)
	return out.Services, err
}

// ErrHostNotMapped: Nova has a compute service for the host but has not mapped the host to
// a cell yet (the scheduler does so periodically after its nova-compute registers), so it
// cannot address the service by host, and no server can be placed there yet either.
var ErrHostNotMapped = errors.New("host not mapped to a cell yet")

// DisableComputeService stops the scheduler from placing servers on host's nova-compute
// (the API before microversion 2.53 addresses services by host and binary). It reports
// whether the service was enabled before; ErrHostNotMapped (wrapping Nova's answer) for
// a host Nova has not mapped to a cell yet.
func (c *Client) DisableComputeService(ctx context.Context, host, reason string) (bool, error) {
	svcs, err := c.ComputeServices(ctx, host)
	if err != nil {
		return false, err
	}
	if len(svcs) == 0 || svcs[0].Status == "disabled" {
		return false, nil
	}
	body := map[string]string{"host": host, "binary": "nova-compute", "disabled_reason": reason}
	err = c.do(ctx, "PUT", compute, "os-services/disable-log-reason", nil, body, nil)
	if IsNotFound(err) && strings.Contains(err.Error(), "not mapped to any cell") {
		return false, fmt.Errorf("%w: %w", ErrHostNotMapped, err)
	}
	return err == nil, err
}

// ActionEvent is one step Nova recorded of a server action (its start and end; Nova
// stores them to the second).
type ActionEvent struct {
	Event      string `json:"event"`
	StartTime  string `json:"start_time"`
	FinishTime string `json:"finish_time"`
	Result     string `json:"result"`
}

// CreateEvents are the events of a server's create action (conductor's scheduling, the
// compute host's build), as Nova records them (admin only).
func (c *Client) CreateEvents(ctx context.Context, id string) ([]ActionEvent, error) {
	var list struct {
		Actions []struct {
			Action    string `json:"action"`
			RequestID string `json:"request_id"`
		} `json:"instanceActions"`
	}
	if err := c.do(ctx, "GET", compute, "servers/"+url.PathEscape(id)+"/os-instance-actions", nil, nil, &list); err != nil {
		return nil, err
	}
	for _, a := range list.Actions {
		if a.Action != "create" {
			continue
		}
		var out struct {
			Action struct {
				Events []ActionEvent `json:"events"`
			} `json:"instanceAction"`
		}
		err := c.do(ctx, "GET", compute, "servers/"+url.PathEscape(id)+"/os-instance-actions/"+url.PathEscape(a.RequestID), nil, nil, &out)
		return out.Action.Events, err
	}
	return nil, fmt.Errorf("server %s has no create action", id)
}
