package openstack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/osdcloud/osd/daemon/api"
)

// LaunchRequest is what osd launch asks for (the API's type); empty fields take the
// day-one defaults (LaunchDefaults).
type LaunchRequest = api.LaunchRequest

// LaunchDefaults fills the empty fields of r (a random name from crypto/rand).
func LaunchDefaults(r LaunchRequest) LaunchRequest {
	if r.Name == "" {
		b := make([]byte, 3)
		rand.Read(b)
		r.Name = "osd-test-" + hex.EncodeToString(b)
	}
	if r.Flavor == "" {
		r.Flavor = TinyFlavorName
	}
	if r.Image == "" {
		r.Image = MachineImageName
	}
	if r.Network == "" {
		r.Network = TenantNetworkName
	}
	if r.Key == "" {
		r.Key = DefaultKeyName
	}
	return r
}

// ErrBadLaunch is wrapped by the errors of a launch request the cloud cannot serve as
// asked (a malformed field, or a flavor, image, network or keypair it does not have):
// the daemon answers them 400 before it starts any work.
var ErrBadLaunch = errors.New("bad launch request")

var (
	// validServerName is what osd launch accepts as a server name (also a hostname).
	validServerName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)
	// validKeyName is a Nova keypair name.
	validKeyName = regexp.MustCompile(`^[A-Za-z0-9 ._@-]{1,255}$`)
)

// ValidateLaunch checks every field of a request (after LaunchDefaults) before any of
// them reaches a query, a path or a command (pure).
func ValidateLaunch(r LaunchRequest) error {
	if !validServerName.MatchString(r.Name) {
		return fmt.Errorf("%w: server name %q: want letters, digits, '.', '_' or '-', starting with a letter or digit (at most 63)", ErrBadLaunch, r.Name)
	}
	for _, f := range []struct{ what, v string }{{"flavor", r.Flavor}, {"image", r.Image}, {"network", r.Network}} {
		if err := checkRef(f.v); err != nil {
			return fmt.Errorf("%w: %s %q: %v", ErrBadLaunch, f.what, f.v, err)
		}
	}
	if !validKeyName.MatchString(r.Key) {
		return fmt.Errorf("%w: keypair %q: want letters, digits, ' ', '.', '_', '@' or '-' (at most 255)", ErrBadLaunch, r.Key)
	}
	if r.VolumeGB < 0 {
		return fmt.Errorf("%w: boot volume of %d GiB: want a positive size", ErrBadLaunch, r.VolumeGB)
	}
	return nil
}

// checkRef checks a name or ID of a flavor, image or network: valid UTF-8, printable, at
// most 255 bytes, not blank.
func checkRef(v string) error {
	switch {
	case strings.TrimSpace(v) == "":
		return errors.New("empty")
	case len(v) > 255:
		return errors.New("longer than 255 bytes")
	case !utf8.ValidString(v):
		return errors.New("not valid UTF-8")
	}
	for _, r := range v {
		if !unicode.IsPrint(r) {
			return fmt.Errorf("holds the control character %U", r)
		}
	}
	return nil
}

// LaunchTarget is a launch request resolved against the cloud: what the server is made of.
type LaunchTarget struct {
	Request LaunchRequest
	Flavor  Flavor
	Image   Image
	Network Network
}

// Resolve validates req (with defaults) and finds its flavor, image, network and keypair
// in the cloud. What the cloud lacks is an error wrapping ErrBadLaunch, saying what exists.
func (l Launcher) Resolve(ctx context.Context, req LaunchRequest) (LaunchTarget, error) {
	req = LaunchDefaults(req)
	tg := LaunchTarget{Request: req}
	if err := ValidateLaunch(req); err != nil {
		return tg, err
	}
	c := l.Client
	if req.VolumeGB > 0 {
		if _, err := c.Endpoint("volumev3"); err != nil {
			return tg, fmt.Errorf("%w: boot from a volume: %v (this cloud has no block storage: osd status shows its storage backend)", ErrBadLaunch, err)
		}
	}
	flavors, err := c.ListFlavors(ctx)
	if err != nil {
		return tg, fmt.Errorf("list flavors: %w", err)
	}
	var names []string
	for _, f := range flavors {
		if f.Name == req.Flavor || f.ID == req.Flavor {
			tg.Flavor = f
			break
		}
		names = append(names, f.Name)
	}
	if tg.Flavor.ID == "" {
		return tg, fmt.Errorf("%w: no flavor %s (there are: %s)", ErrBadLaunch, req.Flavor, list(names))
	}
	if tg.Image, err = l.findImage(ctx, req.Image); err != nil {
		return tg, err
	}
	nets, err := c.ListNetworks(ctx, "")
	if err != nil {
		return tg, fmt.Errorf("list networks: %w", err)
	}
	names = nil
	for _, n := range sortedNetworks(nets) {
		if (n.Name == req.Network || n.ID == req.Network) && tg.Network.ID == "" {
			tg.Network = n
		}
		if !n.External {
			names = append(names, n.Name)
		}
	}
	if tg.Network.ID == "" {
		return tg, fmt.Errorf("%w: no network %s (tenant networks: %s)", ErrBadLaunch, req.Network, list(names))
	}
	kps, err := c.ListKeypairs(ctx)
	if err != nil {
		return tg, fmt.Errorf("list keypairs: %w", err)
	}
	names = nil
	for _, k := range kps {
		if k.Name == req.Key {
			return tg, nil
		}
		names = append(names, k.Name)
	}
	if req.Key == DefaultKeyName {
		return tg, fmt.Errorf("%w: no keypair %s: osd init's day-one step makes it (run osd init), or pass --key NAME (there are: %s)", ErrBadLaunch, req.Key, list(names))
	}
	return tg, fmt.Errorf("%w: no keypair %s (there are: %s; openstack keypair create --public-key FILE %s adds one)", ErrBadLaunch, req.Key, list(names), req.Key)
}

// findImage is the active image named ref, else the image whose ID is ref.
func (l Launcher) findImage(ctx context.Context, ref string) (Image, error) {
	ims, err := l.Client.ListImages(ctx, ref)
	if err != nil {
		return Image{}, fmt.Errorf("list images: %w", err)
	}
	inactive := ""
	for _, im := range sortedImages(ims) {
		if im.Status == "active" {
			return im, nil
		}
		inactive = im.Status
	}
	if uuidLike.MatchString(ref) {
		im, err := l.Client.GetImage(ctx, ref)
		switch {
		case err == nil && im.Status == "active":
			return im, nil
		case err == nil:
			inactive = im.Status
		case !IsNotFound(err):
			return Image{}, fmt.Errorf("image %s: %w", ref, err)
		}
	}
	if inactive != "" {
		return Image{}, fmt.Errorf("%w: image %s is %s, not active", ErrBadLaunch, ref, inactive)
	}
	return Image{}, fmt.Errorf("%w: no image %s (osd init's day-one step uploads %s; openstack image list shows the others)", ErrBadLaunch, ref, MachineImageName)
}

var uuidLike = regexp.MustCompile(`^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$`)

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func sortedNetworks(in []Network) []Network {
	out := append([]Network(nil), in...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}
