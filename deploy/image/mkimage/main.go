// Command mkimage builds Weir's container image from a weir binary without a container
// engine (package image): `make image` runs it. Usage:
//
//	go run ./image/mkimage --binary ../bin/image/weir --version v0.1.0 --revision $(git rev-parse HEAD) \
//	    --layout ../bin/image/oci --tarball ../bin/image/weir.tar
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/weir-io/weir/deploy/image"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("mkimage", flag.ContinueOnError)
	var o image.Options
	fs.StringVar(&o.Binary, "binary", "", "the weir binary (CGO_ENABLED=0)")
	fs.StringVar(&o.CABundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "PEM CA bundle copied into the image")
	fs.StringVar(&o.Version, "version", "dev", "image version label")
	fs.StringVar(&o.Revision, "revision", "", "commit label")
	tag := fs.String("tag", "", "image tag (default weir:VERSION)")
	dir := fs.String("layout", "", "write an OCI image layout to this directory")
	tarFile := fs.String("tarball", "", "write a docker-loadable tarball to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Binary == "" || (*dir == "" && *tarFile == "") {
		return fmt.Errorf("--binary and --layout or --tarball are required")
	}
	// SOURCE_DATE_EPOCH (reproducible builds): the same commit gives the same image.
	o.Created = time.Now().UTC().Truncate(time.Second)
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("SOURCE_DATE_EPOCH: %w", err)
		}
		o.Created = time.Unix(sec, 0).UTC()
	}
	if *tag == "" {
		*tag = "weir:" + o.Version
	}
	img, err := image.Build(o)
	if err != nil {
		return err
	}
	if *dir != "" {
		if err := image.WriteLayout(*dir, *tag, img); err != nil {
			return err
		}
	}
	if *tarFile != "" {
		if err := image.WriteTarball(*tarFile, *tag, img); err != nil {
			return err
		}
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s %s (layout %q, tarball %q)\n", *tag, d, *dir, *tarFile)
	return nil
}
