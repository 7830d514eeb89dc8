package images

// cephRecipe is the image of the single-node Ceph osd runs for block storage: monitor,
// manager and OSD daemons and the ceph/rbd command-line tools, from Debian's packages
// (16.2, Pacific). The manager's Python modules stay in the image; the chart keeps the
// unneeded ones from loading (mgr_disabled_modules), which is where its memory goes.
func cephRecipe(suite, imageRefVersion string) Recipe {
	return Recipe{
		Name: "ceph", Ref: imageRefPrefix + "ceph" + imageRefVersion, Kind: KindDebian,
		Suite: suite, Base: BaseImage,
		Packages: []string{"ceph-mon", "ceph-mgr", "ceph-osd", "ceph-common", "procps"},
		Users:    []User{{Name: "ceph", UID: UIDCeph, GID: UIDCeph, Home: "/var/lib/ceph", Shell: "/usr/sbin/nologin"}},
		// Daemons' data (monitor store, OSD directory) is made per deployment on the
		// node's volume, never at build time.
		Exclude: []string{"var/lib/ceph/*/*"},
		Cmd:     []string{"/bin/bash"},
		User:    "ceph",
		Env:     []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"},
	}
}
