// Package storeconfig chooses and opens the object store from flags: the embedded
// default (localfs, a directory) or S3 (AWS S3, ONTAP S3, MinIO). The broker wraps what it
// gets with objectstore.Instrumented and objectstore.Retrying itself.
package storeconfig

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/weir-io/weir/objectstore"
	"github.com/weir-io/weir/objectstore/localfs"
	"github.com/weir-io/weir/objectstore/s3"
)

// Kinds of object store.
const (
	KindLocal = "localfs"
	KindS3    = "s3"
	KindNone  = "none"
)

// Config selects the object store.
type Config struct {
	// Kind is localfs (Dir), s3 (S3) or none (the WAL keeps everything).
	Kind string
	// Dir is the localfs directory; in a cluster every broker must see the same one.
	Dir string
	S3  s3.Config
}

// DefaultConfig is localfs in dir.
func DefaultConfig(dir string) Config {
	return Config{Kind: KindLocal, Dir: dir, S3: s3.DefaultConfig()}
}

// Validate reports the first invalid setting.
func (c *Config) Validate() error {
	switch c.Kind {
	case KindLocal:
		if c.Dir == "" {
			return errors.New("storeconfig: --object-dir is required for the localfs object store")
		}
	case KindS3:
		return c.S3.Validate()
	case KindNone:
	default:
		return fmt.Errorf("storeconfig: unknown object store %q (localfs, s3 or none)", c.Kind)
	}
	return nil
}

// BindFlags registers --object-store, --object-dir and the --s3-* flags.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Kind, "object-store", c.Kind, "where WAL data moves to: localfs (--object-dir), s3 (--s3-*) or none (the WAL keeps everything)")
	fs.StringVar(&c.Dir, "object-dir", c.Dir, "directory of the localfs object store; every broker of a cluster must share it")
	c.S3.BindFlags(fs)
}

// Open opens the store; nil (and no error) for none.
func (c Config) Open(ctx context.Context) (objectstore.Store, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	// Explicit nils: a nil *localfs.Store in the interface would look like a store.
	switch c.Kind {
	case KindLocal:
		st, err := localfs.Open(c.Dir)
		if err != nil {
			return nil, err
		}
		return st, nil
	case KindS3:
		st, err := s3.New(ctx, c.S3)
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	return nil, nil
}
