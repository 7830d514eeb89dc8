package images

import "github.com/osdcloud/osd/bootstrap/images/oci"

// File and ImageConfig are what a recipe packs (Recipe.Files, Recipe.Config): the
// types of package oci, which makes images of them. The aliases keep the recipes'
// own spelling.
type (
	File        = oci.File
	ImageConfig = oci.ImageConfig
)
