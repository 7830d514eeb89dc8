// Package hypervisor owns the compute host's virtualization layer: the
// hardware-virtualization probe and the virt_type decision (kvm or qemu/TCG),
// the /dev/kvm permissions libvirt needs, starting and checking the libvirt
// daemon that nova-compute uses (through go-libvirt), and the loop-file-backed
// LVM volume group that Cinder's LVM driver serves volumes from.
//
// Pure decisions (ParseCPUFlags, DecideVirtType, PlanVolumeGroup) take no I/O
// and are table-tested; the Ensure* functions run them against the host.
package hypervisor
