package openstack

import (
	"encoding/binary"
	"fmt"
	"net"
	"sort"
)

// FlavorSpec is a flavor day-one makes.
type FlavorSpec struct {
	Name  string `json:"name"`
	VCPUs int    `json:"vcpus"`
	RAM   int    `json:"ram_mib"`
	Disk  int    `json:"disk_gb"`
}

// NetworkSpec is a network with one IPv4 subnet.
type NetworkSpec struct {
	Name            string           `json:"name"`
	Subnet          string           `json:"subnet"`
	CIDR            string           `json:"cidr"`
	Gateway         string           `json:"gateway,omitempty"`
	DHCP            bool             `json:"dhcp"`
	Pools           []AllocationPool `json:"pools,omitempty"`
	External        bool             `json:"external"`
	NetworkType     string           `json:"network_type,omitempty"` // flat for the external network
	PhysicalNetwork string           `json:"physical_network,omitempty"`
}

// RuleSpec is an ingress IPv4 rule: protocol icmp (Port 0) or tcp with a port.
type RuleSpec struct {
	Protocol string `json:"protocol"`
	Port     int    `json:"port,omitempty"`
}

// ImagesSpec is the guest test image to upload: a kernel (aki), a ramdisk
// (ari) and a machine image naming both in its kernel_id and ramdisk_id
// properties. The machine image is a small raw disk of zeros, not an AMI:
// Nova 26 with the CVE-2024-32498 fix (Debian's) inspects a root disk's
// content, qemu-img calls it raw, and it refuses an AMI ("Image content
// does not match disk_format"); Nova boots kernel_id/ramdisk_id of any format.
type ImagesSpec struct {
	Kernel, Ramdisk, Machine string // image names
	KernelPath, RamdiskPath  string // files
	MachineSize              int64  // bytes of zeros for the machine image's disk
	Key                      string // the guest image's cache key, stored as property osd_guest_key
	CommandLine              string // os_command_line property of the machine image
}

// Desired is the day-one state of a cloud.
type Desired struct {
	Flavors       []FlavorSpec
	External      *NetworkSpec // nil: no external network (e.g. a host NIC osd does not know the subnet of)
	Tenant        NetworkSpec
	Router        string
	SecurityGroup string // the admin project's group that gets Rules
	Rules         []RuleSpec
	Images        *ImagesSpec  // nil: no images
	Keypair       *KeypairSpec // nil: no keypair (the admin user's)
}

// MachineDiskFormat and MachineContainerFormat are the machine image's formats.
const (
	MachineDiskFormat      = "raw"
	MachineContainerFormat = "bare"
)

// Default names and sizes.
const (
	ExternalNetworkName = "external"
	TenantNetworkName   = "osd-net"
	RouterName          = "osd-router"
	KernelImageName     = "osd-test-kernel"
	RamdiskImageName    = "osd-test-ramdisk"
	MachineImageName    = "osd-test"
	TinyFlavorName      = "m1.tiny"
)

// DefaultFlavors are m1.tiny to m1.large.
func DefaultFlavors() []FlavorSpec {
	return []FlavorSpec{
		{Name: "m1.tiny", VCPUs: 1, RAM: 256, Disk: 1},
		{Name: "m1.small", VCPUs: 1, RAM: 2048, Disk: 20},
		{Name: "m1.medium", VCPUs: 2, RAM: 4096, Disk: 40},
		{Name: "m1.large", VCPUs: 4, RAM: 8192, Disk: 80},
	}
}

// DefaultDesired is day-one with the external network on cidr (gateway the
// host's address on br-ex) and no images.
func DefaultDesired(cidr, gateway string) (Desired, error) {
	ext, err := ExternalNetwork(cidr, gateway)
	if err != nil {
		return Desired{}, err
	}
	return Desired{
		Flavors:  DefaultFlavors(),
		External: &ext,
		Tenant:   NetworkSpec{Name: TenantNetworkName, Subnet: "osd-subnet", CIDR: "10.20.0.0/24", DHCP: true},
		Router:   RouterName, SecurityGroup: "default",
		Rules: []RuleSpec{{Protocol: "icmp"}, {Protocol: "tcp", Port: 22}},
	}, nil
}

// ExternalNetwork is the flat physnet1 network on cidr without DHCP, with
// floating IPs from host 100 to 199 of the subnet (172.24.4.100-199 for the
// default 172.24.4.0/24), or the upper half of a smaller one.
func ExternalNetwork(cidr, gateway string) (NetworkSpec, error) {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil || n.IP.To4() == nil {
		return NetworkSpec{}, fmt.Errorf("external network %q: want an IPv4 CIDR", cidr)
	}
	if gw := net.ParseIP(gateway); gw == nil || !n.Contains(gw) {
		return NetworkSpec{}, fmt.Errorf("external gateway %q is not in %s", gateway, cidr)
	}
	ones, bits := n.Mask.Size()
	size := uint32(1) << (bits - ones)
	if size < 8 {
		return NetworkSpec{}, fmt.Errorf("external network %s is too small for floating IPs", cidr)
	}
	base := binary.BigEndian.Uint32(n.IP.To4())
	first, last := uint32(100), uint32(199)
	if size < 256 {
		first, last = size/2, size-2
	}
	gw := binary.BigEndian.Uint32(net.ParseIP(gateway).To4())
	if gw >= base+first && gw <= base+last { // keep the host's address out of the pool
		first = gw - base + 1
	}
	ip := func(v uint32) string {
		b := make([]byte, 4)
		binary.BigEndian.PutUint32(b, v)
		return net.IP(b).String()
	}
	return NetworkSpec{Name: ExternalNetworkName, Subnet: "external-subnet", CIDR: n.String(), Gateway: gateway,
		Pools: []AllocationPool{{Start: ip(base + first), End: ip(base + last)}}, External: true,
		NetworkType: "flat", PhysicalNetwork: "physnet1"}, nil
}

// Observed is what a cloud has of the day-one resources.
type Observed struct {
	Flavors       []Flavor
	Networks      []Network
	Subnets       []Subnet
	Routers       []Router
	RouterSubnets map[string][]string // router ID -> subnets it has an interface on
	SecurityGroup *SecurityGroup      // the admin project's Desired.SecurityGroup, if found
	Images        []Image             // the images named like Desired.Images'
	Keypairs      []Keypair           // the admin user's keypairs
}

// OpKind is what an Op does.
type OpKind string

// Operations Plan emits.
const (
	OpCreateFlavor       OpKind = "create-flavor"
	OpCreateNetwork      OpKind = "create-network"
	OpCreateSubnet       OpKind = "create-subnet"
	OpCreateRouter       OpKind = "create-router"
	OpSetRouterGateway   OpKind = "set-router-gateway"
	OpAddRouterInterface OpKind = "add-router-interface"
	OpAddRule            OpKind = "add-security-group-rule"
	OpUploadImage        OpKind = "upload-image"
	OpDeleteImage        OpKind = "delete-image"
	OpCreateKeypair      OpKind = "create-keypair"
	OpReplaceKeypair     OpKind = "replace-keypair" // osd's own keypair whose private key is no longer the host's
	OpWarn               OpKind = "warn"            // something differs that day-one does not change
)

// Op is one change; names are resolved to IDs when it is applied.
type Op struct {
	Kind    OpKind       `json:"kind"`
	Name    string       `json:"name"`             // the resource's name
	Target  string       `json:"target,omitempty"` // network of a subnet, external network of a router, subnet of an interface, image role
	ID      string       `json:"id,omitempty"`     // the resource deleted
	Flavor  *FlavorSpec  `json:"flavor,omitempty"`
	Network *NetworkSpec `json:"network,omitempty"`
	Rule    *RuleSpec    `json:"rule,omitempty"`
	Message string       `json:"message,omitempty"`
}

func (o Op) String() string {
	switch o.Kind {
	case OpWarn:
		return "warning: " + o.Message
	case OpCreateSubnet:
		return fmt.Sprintf("%s %s on %s", o.Kind, o.Name, o.Target)
	case OpSetRouterGateway, OpAddRouterInterface:
		return fmt.Sprintf("%s %s -> %s", o.Kind, o.Name, o.Target)
	case OpAddRule:
		if o.Rule.Port != 0 {
			return fmt.Sprintf("%s %s: ingress %s %d", o.Kind, o.Name, o.Rule.Protocol, o.Rule.Port)
		}
		return fmt.Sprintf("%s %s: ingress %s", o.Kind, o.Name, o.Rule.Protocol)
	case OpDeleteImage:
		return fmt.Sprintf("%s %s (%s)", o.Kind, o.Name, o.ID)
	}
	return fmt.Sprintf("%s %s", o.Kind, o.Name)
}

// Changes counts the ops that change something (not warnings).
func Changes(ops []Op) int {
	n := 0
	for _, o := range ops {
		if o.Kind != OpWarn {
			n++
		}
	}
	return n
}

// Plan returns what to do so the cloud has want, given what it has (pure).
func Plan(obs Observed, want Desired) []Op {
	var ops []Op
	warn := func(format string, a ...any) { ops = append(ops, Op{Kind: OpWarn, Message: fmt.Sprintf(format, a...)}) }

	for _, f := range want.Flavors {
		have, n := findFlavor(obs.Flavors, f.Name)
		switch {
		case n == 0:
			f := f
			ops = append(ops, Op{Kind: OpCreateFlavor, Name: f.Name, Flavor: &f})
		case have.VCPUs != f.VCPUs || have.RAM != f.RAM || have.Disk != f.Disk:
			warn("flavor %s has %d vCPU, %d MiB, %d GB; day-one would make %d, %d, %d (left as is)", f.Name, have.VCPUs, have.RAM, have.Disk, f.VCPUs, f.RAM, f.Disk)
		}
	}

	planNet := func(spec NetworkSpec) bool {
		net, n := findNetwork(obs.Networks, spec.Name)
		created := n == 0
		if created {
			s := spec
			ops = append(ops, Op{Kind: OpCreateNetwork, Name: spec.Name, Network: &s})
		} else {
			if n > 1 {
				warn("%d networks are named %s; using %s", n, spec.Name, net.ID)
			}
			if net.External != spec.External {
				warn("network %s has router:external=%v, want %v (left as is)", spec.Name, net.External, spec.External)
			}
		}
		sub, m := findSubnet(obs.Subnets, spec.Subnet)
		switch {
		case m == 0:
			s := spec
			ops = append(ops, Op{Kind: OpCreateSubnet, Name: spec.Subnet, Target: spec.Name, Network: &s})
		case !created && sub.NetworkID != net.ID:
			warn("subnet %s is not on network %s (left as is)", spec.Subnet, spec.Name)
		case sub.CIDR != spec.CIDR:
			warn("subnet %s is %s, want %s (left as is)", spec.Subnet, sub.CIDR, spec.CIDR)
		}
		return created
	}
	if want.External != nil {
		planNet(*want.External)
	}
	if want.Tenant.Name != "" {
		planNet(want.Tenant)
	}

	if want.Router != "" {
		r, n := findRouter(obs.Routers, want.Router)
		ext := ""
		if want.External != nil {
			ext = want.External.Name
		}
		if n == 0 {
			ops = append(ops, Op{Kind: OpCreateRouter, Name: want.Router, Target: ext})
			ops = append(ops, Op{Kind: OpAddRouterInterface, Name: want.Router, Target: want.Tenant.Subnet})
		} else {
			extNet, _ := findNetwork(obs.Networks, ext)
			if ext != "" && (r.Gateway == nil || r.Gateway.NetworkID == "" || (extNet.ID != "" && r.Gateway.NetworkID != extNet.ID)) {
				ops = append(ops, Op{Kind: OpSetRouterGateway, Name: want.Router, Target: ext})
			}
			sub, _ := findSubnet(obs.Subnets, want.Tenant.Subnet)
			if sub.ID == "" || !contains(obs.RouterSubnets[r.ID], sub.ID) {
				ops = append(ops, Op{Kind: OpAddRouterInterface, Name: want.Router, Target: want.Tenant.Subnet})
			}
		}
	}

	if want.SecurityGroup != "" && len(want.Rules) > 0 {
		if obs.SecurityGroup == nil {
			warn("the admin project has no security group %s: rules %v not added", want.SecurityGroup, want.Rules)
		} else {
			for _, r := range want.Rules {
				if !ruleCovered(obs.SecurityGroup.Rules, r) {
					r := r
					ops = append(ops, Op{Kind: OpAddRule, Name: want.SecurityGroup, Rule: &r})
				}
			}
		}
	}

	if want.Images != nil {
		ops = append(ops, planImages(obs.Images, *want.Images)...)
	}
	if k := want.Keypair; k != nil {
		found := false
		for _, have := range obs.Keypairs {
			if have.Name == k.Name {
				found = true
				if !SameKey(have.PublicKey, k.PublicKey) {
					ops = append(ops, Op{Kind: OpReplaceKeypair, Name: k.Name})
				}
			}
		}
		if !found {
			ops = append(ops, Op{Kind: OpCreateKeypair, Name: k.Name})
		}
	}
	return ops
}

// planImages keeps the kernel, ramdisk and machine images that are active
// and made from the current guest image (the machine image naming the kept
// kernel and ramdisk, with the wanted command line); it uploads the others, then deletes
// the stale ones.
func planImages(have []Image, want ImagesSpec) []Op {
	var uploads, deletes []Op
	keep := map[string]Image{}
	pick := func(name string, ok func(Image) bool) {
		found := false
		for _, im := range sortedImages(have) {
			if im.Name != name {
				continue
			}
			if !found && im.Status == "active" && im.GuestKey == want.Key && ok(im) {
				found = true
				keep[name] = im
				continue
			}
			deletes = append(deletes, Op{Kind: OpDeleteImage, Name: name, ID: im.ID})
		}
		if !found {
			uploads = append(uploads, Op{Kind: OpUploadImage, Name: name, Target: roleOf(want, name)})
		}
	}
	pick(want.Kernel, func(im Image) bool { return im.DiskFormat == diskFormats["kernel"] })
	pick(want.Ramdisk, func(im Image) bool { return im.DiskFormat == diskFormats["ramdisk"] })
	pick(want.Machine, func(im Image) bool {
		k, kok := keep[want.Kernel]
		r, rok := keep[want.Ramdisk]
		return kok && rok && im.KernelID == k.ID && im.RamdiskID == r.ID && im.DiskFormat == MachineDiskFormat && im.CommandLine == want.CommandLine
	})
	return append(uploads, deletes...)
}

func roleOf(s ImagesSpec, name string) string {
	switch name {
	case s.Kernel:
		return "kernel"
	case s.Ramdisk:
		return "ramdisk"
	}
	return "machine"
}

func sortedImages(in []Image) []Image {
	out := append([]Image(nil), in...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ruleCovered reports whether an existing ingress IPv4 rule from anywhere
// already allows r.
func ruleCovered(rules []SecurityGroupRule, r RuleSpec) bool {
	for _, x := range rules {
		if x.Direction != "ingress" || x.EtherType != "IPv4" || x.RemoteGroupID != "" {
			continue
		}
		if x.RemoteIPPrefix != "" && x.RemoteIPPrefix != "0.0.0.0/0" {
			continue
		}
		if x.Protocol == "" { // any protocol
			return true
		}
		if x.Protocol != r.Protocol {
			continue
		}
		if r.Port == 0 {
			if x.PortMin == nil && x.PortMax == nil {
				return true
			}
			continue
		}
		if (x.PortMin == nil || *x.PortMin <= r.Port) && (x.PortMax == nil || *x.PortMax >= r.Port) {
			return true
		}
	}
	return false
}

func findFlavor(fs []Flavor, name string) (Flavor, int) {
	var first Flavor
	n := 0
	for _, f := range fs {
		if f.Name == name {
			if n == 0 {
				first = f
			}
			n++
		}
	}
	return first, n
}

func findNetwork(ns []Network, name string) (Network, int) {
	var first Network
	n := 0
	for _, x := range ns {
		if x.Name == name && name != "" {
			if n == 0 {
				first = x
			}
			n++
		}
	}
	return first, n
}

func findSubnet(ss []Subnet, name string) (Subnet, int) {
	var first Subnet
	n := 0
	for _, x := range ss {
		if x.Name == name {
			if n == 0 {
				first = x
			}
			n++
		}
	}
	return first, n
}

func findRouter(rs []Router, name string) (Router, int) {
	var first Router
	n := 0
	for _, x := range rs {
		if x.Name == name {
			if n == 0 {
				first = x
			}
			n++
		}
	}
	return first, n
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
