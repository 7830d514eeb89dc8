// Package guest owns osd's guest test image: a Debian cloud kernel and a
// busybox initramfs built from Debian packages fetched from the configured
// apt mirror (nothing else is downloaded), with Debian's dropbear SSH server
// and the shared libraries its binaries load (ELFClosure), and what CirrOS carries that
// test suites such as Tempest's run in the guest: Debian's curl, mkfs.ext4 and blkid
// (with their libraries), busybox's ip, ping, nc, wget, ifconfig, hostname and mount
// (linked at their usual paths too) and a passwordless sudo for the login user
// (asm.AsRootBinary, set-user-ID root, run by that user's group only). The initramfs loads
// the virtio network, CD-ROM and ACPI button modules (in modules.dep order),
// brings eth0 up with udhcpc, prints a marker line with its address on the
// console (see ParseConsole), reads meta_data.json from a config drive (label
// config-2) and from the metadata service at 169.254.169.254, prints its uuid,
// sets its hostname and installs the public keys for LoginUser, serves SSH on
// port 22 (its host key printed on the console) and HTTP on port 80, offers a
// console login (ConsolePassword) and powers off on the ACPI power button.
//
// Build caches the kernel/initramfs pair under CacheDir/guest keyed by the
// resolved package versions and the initramfs recipe, so building twice is
// a cache hit:
//
//	img, err := guest.Build(ctx, guest.Options{CacheDir: "/var/cache/osd"})
//	// img.Kernel, img.Initrd: files to boot (or upload to Glance as aki/ari)
package guest
