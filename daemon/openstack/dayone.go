package openstack

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/osdcloud/osd/bootstrap/images/guest"
)

// GuestImages is the images spec for a built guest image, booted with the guest's
// kernel command line (guest.CommandLine).
func GuestImages(img guest.Image) *ImagesSpec {
	return &ImagesSpec{Kernel: KernelImageName, Ramdisk: RamdiskImageName, Machine: MachineImageName,
		KernelPath: img.Kernel, RamdiskPath: img.Initrd, MachineSize: 1 << 20, Key: img.Key,
		CommandLine: guest.CommandLine}
}

// ForCatalog drops from want what needs a service the catalog lacks (Nova
// for flavors, Neutron for networks, Glance for images) and says what it dropped.
func ForCatalog(want Desired, catalog []CatalogEntry) (Desired, []string) {
	has := map[string]bool{}
	for _, s := range catalog {
		has[s.Type] = true
	}
	var skipped []string
	if !has["compute"] && (len(want.Flavors) > 0 || want.Keypair != nil) {
		want.Flavors, want.Keypair = nil, nil
		skipped = append(skipped, "flavors, keypair (no compute service)")
	}
	if !has["network"] {
		want.External, want.Tenant, want.Router, want.SecurityGroup, want.Rules = nil, NetworkSpec{}, "", "", nil
		skipped = append(skipped, "networks, router, security group rules (no network service)")
	}
	if !has["image"] {
		want.Images = nil
		skipped = append(skipped, "images (no image service)")
	}
	return want, skipped
}

// DayOneConfig is what EnsureDayOne needs.
type DayOneConfig struct {
	Credentials Credentials
	// Client, if set, is logged in with Credentials already and used instead of a new
	// login.
	Client          *Client
	CacheDir        string // the guest image cache (guest.Options.CacheDir)
	KeyFile         string // osd's private key for DefaultKeyName (made if missing); "" for no keypair
	ExternalCIDR    string // default 172.24.4.0/24
	ExternalGateway string // default 172.24.4.1
	NoExternal      bool   // the external network is a host NIC osd does not know the subnet of
	Progress        func(string)
}

// EnsureDayOne builds (or finds cached) the guest image and makes the
// day-one resources the cloud's services can hold. changed reports whether
// anything was created or replaced; detail summarizes.
func EnsureDayOne(ctx context.Context, cfg DayOneConfig) (changed bool, detail string, err error) {
	start := time.Now()
	progress := cfg.Progress
	if progress == nil {
		progress = func(string) {}
	}
	if cfg.ExternalCIDR == "" {
		cfg.ExternalCIDR, cfg.ExternalGateway = "172.24.4.0/24", "172.24.4.1"
	}
	want, err := DefaultDesired(cfg.ExternalCIDR, cfg.ExternalGateway)
	if err != nil {
		return false, "", err
	}
	if cfg.NoExternal {
		want.External = nil
	}
	c := cfg.Client
	if c == nil {
		if c, err = Authenticate(ctx, cfg.Credentials); err != nil {
			return false, "", err
		}
	}
	if cfg.KeyFile != "" {
		pub, created, err := EnsureKeyFile(cfg.KeyFile)
		if err != nil {
			return false, "", err
		}
		if created {
			progress("keypair " + DefaultKeyName + ": private key made in " + cfg.KeyFile)
		}
		want.Keypair = &KeypairSpec{Name: DefaultKeyName, PublicKey: pub}
	}
	if _, err := c.Endpoint("image"); err == nil {
		progress("guest image: building or checking the cache")
		img, err := guest.Build(ctx, guest.Options{CacheDir: cfg.CacheDir})
		if err != nil {
			return false, "", err
		}
		how := "built"
		if img.Cached {
			how = "cached"
		}
		progress(fmt.Sprintf("guest image: kernel %s, %s", img.KernelVersion, how))
		want.Images = GuestImages(img)
	}
	want, skipped := ForCatalog(want, c.Catalog())
	ops, err := Ensure(ctx, c, want, func(o Op) { progress(o.String()) })
	if err != nil {
		return Changes(ops) > 0, "", err
	}
	var parts []string
	n := Changes(ops)
	if n == 0 {
		parts = append(parts, "nothing to change")
	} else {
		parts = append(parts, fmt.Sprintf("%d changes", n))
	}
	for _, o := range ops {
		if o.Kind == OpWarn {
			parts = append(parts, o.String())
		}
	}
	if len(skipped) > 0 {
		parts = append(parts, "skipped: "+strings.Join(skipped, ", "))
	}
	if cfg.NoExternal {
		parts = append(parts, "no external network made (br-ex holds a host interface: create it by hand)")
	}
	parts = append(parts, "took "+time.Since(start).Round(10*time.Millisecond).String())
	return n > 0, strings.Join(parts, "; "), nil
}
