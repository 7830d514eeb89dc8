package openstack

import (
	"context"
	"io"
	"net/url"
	"os"
)

// Image is a Glance image with the properties osd uses.
type Image struct {
	ID              string `json:"id"`
	Name            string `json:"name"`
	Status          string `json:"status"` // queued, saving, active, ...
	DiskFormat      string `json:"disk_format"`
	ContainerFormat string `json:"container_format"`
	Size            int64  `json:"size"`
	Checksum        string `json:"checksum"`
	Visibility      string `json:"visibility"`
	KernelID        string `json:"kernel_id"`
	RamdiskID       string `json:"ramdisk_id"`
	GuestKey        string `json:"osd_guest_key"` // osd's guest image cache key
	CommandLine     string `json:"os_command_line"`
}

// ImageRequest is a new image's metadata; Properties are extra top-level
// string properties (kernel_id, ramdisk_id, os_command_line, ...).
type ImageRequest struct {
	Name            string
	DiskFormat      string // aki, ari, ami, raw, qcow2
	ContainerFormat string // aki, ari, ami, bare
	Visibility      string // public (default), private, shared
	Properties      map[string]string
}

// ListImages lists images, only those named name when name is not empty.
func (c *Client) ListImages(ctx context.Context, name string) ([]Image, error) {
	q := url.Values{"limit": {"1000"}}
	if name != "" {
		q.Set("name", name)
	}
	var out struct {
		Images []Image `json:"images"`
	}
	err := c.do(ctx, "GET", image, "images", q, nil, &out)
	return out.Images, err
}

// GetImage returns one image.
func (c *Client) GetImage(ctx context.Context, id string) (Image, error) {
	var out Image
	err := c.do(ctx, "GET", image, "images/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// CreateImage creates an image record (status queued) to upload data into.
func (c *Client) CreateImage(ctx context.Context, r ImageRequest) (Image, error) {
	body := map[string]any{"name": r.Name, "disk_format": r.DiskFormat, "container_format": r.ContainerFormat, "visibility": r.Visibility}
	if r.Visibility == "" {
		body["visibility"] = "public"
	}
	for k, v := range r.Properties {
		body[k] = v
	}
	var out Image
	err := c.do(ctx, "POST", image, "images", nil, body, &out)
	return out, err
}

// UploadImageFile uploads a file as an image's data.
func (c *Client) UploadImageFile(ctx context.Context, id, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return c.UploadImage(ctx, id, func() io.Reader { f.Seek(0, io.SeekStart); return f })
}

// UploadImage uploads an image's data (body is called again on a retry).
func (c *Client) UploadImage(ctx context.Context, id string, body func() io.Reader) error {
	return c.send(ctx, "PUT", image, "images/"+url.PathEscape(id)+"/file", nil, "application/octet-stream", body, true, nil)
}

// DeleteImage deletes an image (a missing one is not an error).
func (c *Client) DeleteImage(ctx context.Context, id string) error {
	err := c.do(ctx, "DELETE", image, "images/"+url.PathEscape(id), nil, nil, nil)
	if IsNotFound(err) {
		return nil
	}
	return err
}
