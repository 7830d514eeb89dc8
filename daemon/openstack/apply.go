package openstack

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// Observe reads what the cloud has of want's resources. The reads are independent
// and run side by side (a no-op osd init waits for the slowest, not for their sum);
// the first failure, in the order below, is the error.
func Observe(ctx context.Context, c *Client, want Desired) (Observed, error) {
	var obs Observed
	var reads []func() error
	if len(want.Flavors) > 0 {
		reads = append(reads, func() (err error) {
			if obs.Flavors, err = c.ListFlavors(ctx); err != nil {
				return fmt.Errorf("observe flavors: %w", err)
			}
			return nil
		})
	}
	if want.External != nil || want.Tenant.Name != "" || want.Router != "" {
		reads = append(reads, func() (err error) {
			if obs.Networks, err = c.ListNetworks(ctx, ""); err != nil {
				return fmt.Errorf("observe networks: %w", err)
			}
			return nil
		}, func() (err error) {
			if obs.Subnets, err = c.ListSubnets(ctx, ""); err != nil {
				return fmt.Errorf("observe subnets: %w", err)
			}
			return nil
		})
	}
	if want.Router != "" {
		reads = append(reads, func() (err error) {
			if obs.Routers, err = c.ListRouters(ctx, want.Router); err != nil {
				return fmt.Errorf("observe routers: %w", err)
			}
			obs.RouterSubnets = map[string][]string{}
			for _, r := range obs.Routers {
				ports, err := c.ListPorts(ctx, map[string]string{"device_id": r.ID})
				if err != nil {
					return fmt.Errorf("observe ports of router %s: %w", r.Name, err)
				}
				for _, p := range ports {
					if p.DeviceOwner == "network:router_gateway" {
						continue
					}
					for _, ip := range p.FixedIPs {
						obs.RouterSubnets[r.ID] = append(obs.RouterSubnets[r.ID], ip.SubnetID)
					}
				}
			}
			return nil
		})
	}
	if want.SecurityGroup != "" {
		reads = append(reads, func() error {
			sgs, err := c.ListSecurityGroups(ctx, want.SecurityGroup, c.ProjectID())
			if err != nil {
				return fmt.Errorf("observe security groups: %w", err)
			}
			if len(sgs) > 0 {
				obs.SecurityGroup = &sgs[0]
			}
			return nil
		})
	}
	if want.Keypair != nil {
		reads = append(reads, func() (err error) {
			if obs.Keypairs, err = c.ListKeypairs(ctx); err != nil {
				return fmt.Errorf("observe keypairs: %w", err)
			}
			return nil
		})
	}
	var images [3][]Image
	if want.Images != nil {
		for i, n := range []string{want.Images.Kernel, want.Images.Ramdisk, want.Images.Machine} {
			reads = append(reads, func() (err error) {
				if images[i], err = c.ListImages(ctx, n); err != nil {
					return fmt.Errorf("observe images: %w", err)
				}
				return nil
			})
		}
	}
	errs := make([]error, len(reads))
	var wg sync.WaitGroup
	for i, read := range reads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = read()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return obs, err
		}
	}
	for _, ims := range images {
		obs.Images = append(obs.Images, ims...)
	}
	return obs, nil
}

// applier resolves names to IDs while ops run.
type applier struct {
	c        *Client
	want     Desired
	obs      Observed
	networks map[string]string
	subnets  map[string]string
	routers  map[string]string
	images   map[string]string // role -> ID of the image kept or uploaded
}

// Apply runs ops in order; progress, if not nil, hears each op as it starts.
func Apply(ctx context.Context, c *Client, want Desired, obs Observed, ops []Op, progress func(Op)) error {
	a := &applier{c: c, want: want, obs: obs, networks: map[string]string{}, subnets: map[string]string{}, routers: map[string]string{}, images: map[string]string{}}
	for _, n := range obs.Networks {
		if _, ok := a.networks[n.Name]; !ok {
			a.networks[n.Name] = n.ID
		}
	}
	for _, s := range obs.Subnets {
		if _, ok := a.subnets[s.Name]; !ok {
			a.subnets[s.Name] = s.ID
		}
	}
	for _, r := range obs.Routers {
		if _, ok := a.routers[r.Name]; !ok {
			a.routers[r.Name] = r.ID
		}
	}
	if want.Images != nil {
		for _, im := range sortedImages(obs.Images) {
			role := roleOf(*want.Images, im.Name)
			if _, ok := a.images[role]; !ok && im.Status == "active" && im.GuestKey == want.Images.Key && im.DiskFormat == diskFormats[role] {
				a.images[role] = im.ID
			}
		}
	}
	for _, op := range ops {
		if op.Kind == OpWarn {
			continue
		}
		if progress != nil {
			progress(op)
		}
		if err := a.apply(ctx, op); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	return nil
}

func (a *applier) id(kind string, m map[string]string, name string) (string, error) {
	id, ok := m[name]
	if !ok || id == "" {
		return "", fmt.Errorf("no %s named %s", kind, name)
	}
	return id, nil
}

func (a *applier) apply(ctx context.Context, op Op) error {
	c := a.c
	switch op.Kind {
	case OpCreateFlavor:
		_, err := c.CreateFlavor(ctx, op.Flavor.Name, op.Flavor.VCPUs, op.Flavor.RAM, op.Flavor.Disk)
		return err
	case OpCreateNetwork:
		s := op.Network
		n, err := c.CreateNetwork(ctx, Network{Name: s.Name, External: s.External, NetworkType: s.NetworkType, PhysicalNetwork: s.PhysicalNetwork})
		a.networks[s.Name] = n.ID
		return err
	case OpCreateSubnet:
		netID, err := a.id("network", a.networks, op.Target)
		if err != nil {
			return err
		}
		s := op.Network
		sub, err := c.CreateSubnet(ctx, Subnet{Name: s.Subnet, NetworkID: netID, CIDR: s.CIDR, GatewayIP: s.Gateway, EnableDHCP: s.DHCP, AllocationPools: s.Pools})
		a.subnets[s.Subnet] = sub.ID
		return err
	case OpCreateRouter:
		ext := ""
		if op.Target != "" {
			var err error
			if ext, err = a.id("network", a.networks, op.Target); err != nil {
				return err
			}
		}
		r, err := c.CreateRouter(ctx, op.Name, ext)
		a.routers[op.Name] = r.ID
		return err
	case OpSetRouterGateway:
		rid, err := a.id("router", a.routers, op.Name)
		if err != nil {
			return err
		}
		ext, err := a.id("network", a.networks, op.Target)
		if err != nil {
			return err
		}
		_, err = c.SetRouterGateway(ctx, rid, ext)
		return err
	case OpAddRouterInterface:
		rid, err := a.id("router", a.routers, op.Name)
		if err != nil {
			return err
		}
		sid, err := a.id("subnet", a.subnets, op.Target)
		if err != nil {
			return err
		}
		err = c.AddRouterInterface(ctx, rid, sid)
		if IsConflict(err) || isBadRequestAlready(err) {
			return nil // attached meanwhile
		}
		return err
	case OpAddRule:
		r := SecurityGroupRule{SecurityGroupID: a.obs.SecurityGroup.ID, Direction: "ingress", EtherType: "IPv4",
			Protocol: op.Rule.Protocol, RemoteIPPrefix: "0.0.0.0/0"}
		if op.Rule.Port != 0 {
			p := op.Rule.Port
			r.PortMin, r.PortMax = &p, &p
		}
		_, err := c.CreateSecurityGroupRule(ctx, r)
		if IsConflict(err) {
			return nil // the same rule exists
		}
		return err
	case OpUploadImage:
		return a.upload(ctx, op)
	case OpDeleteImage:
		return c.DeleteImage(ctx, op.ID)
	case OpCreateKeypair:
		return c.ImportKeypair(ctx, a.want.Keypair.Name, a.want.Keypair.PublicKey)
	case OpReplaceKeypair:
		if err := c.DeleteKeypair(ctx, a.want.Keypair.Name); err != nil {
			return err
		}
		return c.ImportKeypair(ctx, a.want.Keypair.Name, a.want.Keypair.PublicKey)
	}
	return fmt.Errorf("unknown op kind %q", op.Kind)
}

func isBadRequestAlready(err error) bool {
	var ae *APIError
	return err != nil && statusOf(err) == 400 && asAPIError(err, &ae) && bytes.Contains([]byte(ae.Message), []byte("already"))
}

// diskFormats are the images' formats by role.
var diskFormats = map[string]string{"kernel": "aki", "ramdisk": "ari", "machine": MachineDiskFormat}

func (a *applier) upload(ctx context.Context, op Op) error {
	s := a.want.Images
	req := ImageRequest{Name: op.Name, Properties: map[string]string{"osd_guest_key": s.Key}}
	var data func() io.Reader
	switch op.Target {
	case "kernel":
		req.DiskFormat, req.ContainerFormat = "aki", "aki"
	case "ramdisk":
		req.DiskFormat, req.ContainerFormat = "ari", "ari"
	default:
		k, err := a.id("kernel image", a.images, "kernel")
		if err != nil {
			return err
		}
		r, err := a.id("ramdisk image", a.images, "ramdisk")
		if err != nil {
			return err
		}
		// A raw disk of zeros naming the kernel and ramdisk: Nova checks image content against
		// disk_format before it boots (an "ami" of zeros is refused as "does not match").
		req.DiskFormat, req.ContainerFormat = MachineDiskFormat, MachineContainerFormat
		req.Properties["kernel_id"], req.Properties["ramdisk_id"] = k, r
		if s.CommandLine != "" {
			req.Properties["os_command_line"] = s.CommandLine
		}
		size := s.MachineSize
		data = func() io.Reader { return io.LimitReader(zeros{}, size) }
	}
	im, err := a.c.CreateImage(ctx, req)
	if err != nil {
		return err
	}
	switch op.Target {
	case "kernel":
		err = a.c.UploadImageFile(ctx, im.ID, s.KernelPath)
	case "ramdisk":
		err = a.c.UploadImageFile(ctx, im.ID, s.RamdiskPath)
	default:
		err = a.c.UploadImage(ctx, im.ID, data)
	}
	if err != nil {
		a.c.DeleteImage(context.WithoutCancel(ctx), im.ID)
		return err
	}
	// Glance answers the upload once the data is stored: wait for active.
	for i := 0; ; i++ {
		got, err := a.c.GetImage(ctx, im.ID)
		if err != nil {
			return err
		}
		if got.Status == "active" {
			break
		}
		if got.Status == "killed" || got.Status == "deleted" || i > 60 {
			return fmt.Errorf("image %s is %s after upload", im.ID, got.Status)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	a.images[op.Target] = im.ID
	return nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// Ensure observes the cloud, plans and applies; it returns the ops it ran
// (warnings included). A converged cloud yields no changing op.
func Ensure(ctx context.Context, c *Client, want Desired, progress func(Op)) ([]Op, error) {
	obs, err := Observe(ctx, c, want)
	if err != nil {
		return nil, err
	}
	ops := Plan(obs, want)
	return ops, Apply(ctx, c, want, obs, ops, progress)
}
