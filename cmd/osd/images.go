package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/osdcloud/osd/daemon/api"
	"github.com/osdcloud/osd/daemon/client"
)

func newImagesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "images",
		Short: "Build, list and move the container images osd runs (built from Debian packages, no registry)",
	}
	list := newImagesListCmd(g)
	build := &cobra.Command{
		Use:   "build [NAME...]",
		Short: "Build images from Debian packages (all when no name is given); unchanged recipes are not rebuilt",
		RunE: func(cmd *cobra.Command, args []string) error {
			c := g.client()
			var op api.Operation
			if err := c.Query(cmd.Context(), "POST", "images/build", api.ImagesRequest{Names: args}, &op); err != nil {
				return err
			}
			return followOperation(cmd.Context(), c, op.ID)
		},
	}
	var force bool
	export := &cobra.Command{
		Use:   "export FILE [NAME...]",
		Short: "Write an airgap bundle with the stored images (all when no name is given) and their recipe hashes",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			var stored []api.StoredImage
			if err := g.client().Query(cmd.Context(), "POST", "images/export", api.ImagesRequest{Path: path, Names: args[1:], Force: force}, &stored); err != nil {
				return err
			}
			for _, s := range stored {
				fmt.Printf("exported %s %s\n", s.Ref, shortDigest(s.Digest))
			}
			fmt.Printf("bundle: %s\n", path)
			return nil
		},
	}
	export.Flags().BoolVar(&force, "force", false, "replace FILE if it exists")
	imp := &cobra.Command{
		Use:   "import FILE",
		Short: "Verify an airgap bundle and import its images (a damaged bundle is refused whole)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			path, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			if _, err := os.Stat(path); err != nil {
				return fmt.Errorf("bundle %s: %w", path, err)
			}
			var stored []api.StoredImage
			if err := g.client().Query(cmd.Context(), "POST", "images/import", api.ImagesRequest{Path: path}, &stored); err != nil {
				return err
			}
			for _, s := range stored {
				fmt.Printf("imported %s %s\n", s.Ref, shortDigest(s.Digest))
			}
			return nil
		},
	}
	cmd.AddCommand(list, build, export, imp)
	return cmd
}

// followOperation prints an operation's progress until it ends.
func followOperation(ctx context.Context, c *client.Client, id string) error {
	shown := 0
	for {
		var op api.Operation
		if err := c.Query(ctx, "GET", "operations/"+id, nil, &op); err != nil {
			return err
		}
		for ; shown < len(op.Events); shown++ {
			fmt.Println(op.Events[shown])
		}
		switch op.State {
		case api.OperationSucceeded:
			fmt.Printf("done in %s\n", op.Finished.Sub(op.Started).Round(100*time.Millisecond))
			return nil
		case api.OperationFailed, api.OperationCancelled:
			return fmt.Errorf("%s %s: %s", op.Kind, op.State, op.Error)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func shortDigest(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

func newImagesListCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the image catalog: reference, digest, size, and whether the stored image is current",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			var st []api.ImageStatus
			if err := g.client().Query(cmd.Context(), "GET", "images", nil, &st); err != nil {
				return err
			}
			return render(os.Stdout, format, st, func(tw *tabwriter.Writer) {
				fmt.Fprintln(tw, "NAME\tREFERENCE\tDIGEST\tSIZE\tSTATE")
				for _, s := range st {
					state := "not built"
					switch {
					case s.Cached:
						state = "cached"
					case s.Stored:
						state = "stale (recipe changed)"
					}
					digest, size := "-", "-"
					if s.Stored {
						digest, size = shortDigest(s.Digest), fmt.Sprintf("%d MiB", s.Size>>20)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Ref, digest, size, state)
				}
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "table", "output format: table, json or yaml")
	return cmd
}
