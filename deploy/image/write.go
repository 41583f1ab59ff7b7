package image

import (
	"fmt"
	"os"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// WriteLayout writes img as an OCI image layout directory (what `skopeo copy oci:DIR`,
// `crane push --image-refs`, podman and containerd's `ctr import` read), replacing
// whatever dir held, with the tag as its ref name.
func WriteLayout(dir, tag string, img v1.Image) error {
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("image: layout: %w", err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("image: layout: %w", err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag,
	})); err != nil {
		return fmt.Errorf("image: layout: %w", err)
	}
	return nil
}

// WriteTarball writes img as a `docker load` tarball tagged tag (e.g. weir:0.1.0).
func WriteTarball(file, tag string, img v1.Image) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("image: tag: %w", err)
	}
	if err := tarball.WriteToFile(file, ref, img); err != nil {
		return fmt.Errorf("image: tarball: %w", err)
	}
	return nil
}
