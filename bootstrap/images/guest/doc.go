// Package guest owns osd's guest test image: a Debian cloud kernel and a
// busybox initramfs built from Debian packages fetched from the configured
// apt mirror (nothing else is downloaded). The initramfs loads the virtio
// network modules (in modules.dep order), brings eth0 up with udhcpc, prints
// a marker line with its address on the console (see ParseConsole), reads its
// own uuid from the metadata service at 169.254.169.254 and prints it, and
// keeps running with small TCP listeners on ports 22 and 80.
//
// Build caches the kernel/initramfs pair under CacheDir/guest keyed by the
// resolved package versions and the initramfs recipe, so building twice is
// a cache hit:
//
//	img, err := guest.Build(ctx, guest.Options{CacheDir: "/var/cache/osd"})
//	// img.Kernel, img.Initrd: files to boot (or upload to Glance as aki/ari)
package guest
