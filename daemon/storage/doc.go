// Package storage is the daemon's block storage resource: the backend (ceph, lvm or none)
// and its size, decided once from the host probe and osd init's --storage and
// --storage-size and recorded in the state store; what the deployment enables for it
// (Ceph and Cinder, Glance on RBD); GET /1.0/storage with Ceph's health, space and pools
// read from the monitor's pod (ParseCeph, pure); and the images the backend needs.
package storage
