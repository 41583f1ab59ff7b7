// Package image builds Weir's container image without a container engine: one layer
// holding the static weir binary, the build host's CA bundle, a non-root user and its
// state directory, on an empty base (what distroless/static offers Weir, minus what it
// never reads), written as an OCI image layout and a `docker load` tarball with
// go-containerregistry. The Dockerfile beside this file builds the same image where an
// engine runs; image_test.go checks that both name the same user, entrypoint, paths and
// ports (the constants below are the single source of both).
//
// The layer, drawn as its tar entries (uid:gid mode):
//
//	etc/                                   0:0     0755
//	etc/group                              0:0     0644  root, weir (65532)
//	etc/passwd                             0:0     0644  root, weir (65532, home /var/lib/weir)
//	etc/ssl/certs/ca-certificates.crt      0:0     0644  the build host's bundle
//	tmp/                                   0:0     1777
//	usr/local/bin/weir                     0:0     0755  the binary (statically linked)
//	var/lib/weir/                          65532:65532 0700  --data-dir (a volume in compose, a PVC in the chart)
//
// Every entry has the same modification time (Options.Created), so the same inputs
// give the same layer digest.
package image

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image is made of; the Dockerfile must agree (image_test.go).
const (
	BinaryPath = "/usr/local/bin/weir"
	CABundle   = "/etc/ssl/certs/ca-certificates.crt"
	DataDir    = "/var/lib/weir"
	UserName   = "weir"
	UID        = 65532 // distroless's nonroot uid, so volumes prepared for either fit both
	GID        = 65532
	Source     = "https://github.com/weir-io/weir"
)

// User is the config's User field: numeric, so runtimes that refuse to run a named
// user as non-root (Kubernetes' runAsNonRoot) can check it.
var User = fmt.Sprintf("%d:%d", UID, GID)

// ExposedPorts: Kafka, metrics/health, gossip (TCP and UDP), controller Raft and API.
var ExposedPorts = []string{"9092/tcp", "9644/tcp", "7946/tcp", "7946/udp", "9301/tcp", "9401/tcp"}

// DefaultCmd runs a whole cluster in the container (what `docker run IMAGE` does);
// compose and the chart give `controller` or `broker` with their flags instead.
var DefaultCmd = []string{"dev", "--host", "0.0.0.0", "--data-dir", DataDir, "--metrics", "0.0.0.0:9644"}

// ErrDynamicBinary: the binary names an ELF interpreter, so it needs a libc the image
// does not have (build it with CGO_ENABLED=0).
var ErrDynamicBinary = errors.New("image: binary is dynamically linked")

// Options are the inputs of Build.
type Options struct {
	Binary   string    // path of the weir binary
	CABundle string    // path of a PEM CA bundle (the build host's)
	Version  string    // org.opencontainers.image.version
	Revision string    // org.opencontainers.image.revision (the commit)
	Created  time.Time // org.opencontainers.image.created, the config's and every file's time
}

// Labels are the OCI annotations the image config carries.
func (o Options) Labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    "weir",
		"org.opencontainers.image.version":  o.Version,
		"org.opencontainers.image.revision": o.Revision,
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.created":  o.Created.UTC().Format(time.RFC3339),
	}
}

// Build makes the image: the empty base plus one layer, OCI media types throughout.
func Build(o Options) (v1.Image, error) {
	bin, err := os.ReadFile(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("image: binary: %w", err)
	}
	if err := checkStatic(bin); err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(o.CABundle)
	if err != nil {
		return nil, fmt.Errorf("image: CA bundle: %w", err)
	}
	layerTar, err := buildLayer(o.Created, bin, ca)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: o.Created}, CreatedBy: "weir deploy/image", Comment: "weir binary, CA bundle, user weir",
	}})
	if err != nil {
		return nil, fmt.Errorf("image: append: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image: config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	if a := elfArch(bin); a != "" {
		cf.Architecture = a
	}
	cf.Created = v1.Time{Time: o.Created}
	cf.Config = v1.Config{
		Entrypoint:   []string{BinaryPath},
		Cmd:          append([]string(nil), DefaultCmd...),
		User:         User,
		WorkingDir:   DataDir,
		Env:          []string{"PATH=/usr/local/bin", "HOME=" + DataDir, "SSL_CERT_FILE=" + CABundle},
		ExposedPorts: map[string]struct{}{},
		Volumes:      map[string]struct{}{DataDir: {}},
		Labels:       o.Labels(),
	}
	for _, p := range ExposedPorts {
		cf.Config.ExposedPorts[p] = struct{}{}
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("image: config: %w", err)
	}
	return img, nil
}

// checkStatic refuses an ELF binary with an interpreter (dynamically linked); a file
// that is not ELF (tests' stand-ins) passes.
func checkStatic(bin []byte) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return nil
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%w (build it with CGO_ENABLED=0)", ErrDynamicBinary)
		}
	}
	return nil
}

// elfArch is the OCI architecture of an ELF binary, "" if unknown or not ELF.
func elfArch(bin []byte) string {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return ""
	}
	defer f.Close()
	switch f.Machine {
	case elf.EM_X86_64:
		return "amd64"
	case elf.EM_AARCH64:
		return "arm64"
	}
	return ""
}

// entry is one tar entry of the layer.
type entry struct {
	name     string
	mode     int64
	uid, gid int
	body     []byte // nil: a directory
}

// Passwd and Group are the files that give the uid and gid their names.
func Passwd() string {
	return fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:weir:%s:/sbin/nologin\n", UserName, UID, GID, DataDir)
}

// Group: see Passwd.
func Group() string {
	return fmt.Sprintf("root:x:0:\n%s:x:%d:\n", UserName, GID)
}

// buildLayer writes the layer's tar: parents before children, sorted, one time.
func buildLayer(mtime time.Time, bin, ca []byte) ([]byte, error) {
	files := []entry{
		{name: BinaryPath[1:], mode: 0o755, body: bin},
		{name: CABundle[1:], mode: 0o644, body: ca},
		{name: "etc/passwd", mode: 0o644, body: []byte(Passwd())},
		{name: "etc/group", mode: 0o644, body: []byte(Group())},
	}
	dirs := map[string]entry{
		"tmp":       {name: "tmp", mode: 0o1777},
		DataDir[1:]: {name: DataDir[1:], mode: 0o700, uid: UID, gid: GID},
	}
	for _, f := range files {
		for d := path.Dir(f.name); d != "."; d = path.Dir(d) {
			if _, ok := dirs[d]; !ok {
				dirs[d] = entry{name: d, mode: 0o755}
			}
		}
	}
	for d := path.Dir(DataDir[1:]); d != "."; d = path.Dir(d) {
		if _, ok := dirs[d]; !ok {
			dirs[d] = entry{name: d, mode: 0o755}
		}
	}
	all := files
	for _, d := range dirs {
		all = append(all, d)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].name < all[j].name })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range all {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: mtime, Format: tar.FormatPAX}
		if e.body == nil {
			h.Typeflag, h.Name = tar.TypeDir, e.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if e.uid == UID {
			h.Uname, h.Gname = UserName, UserName
		} else {
			h.Uname, h.Gname = "root", "root"
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("image: layer: %w", err)
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, fmt.Errorf("image: layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image: layer: %w", err)
	}
	return buf.Bytes(), nil
}
