package image

import (
	"archive/tar"
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// testOptions builds from a stand-in binary (not ELF: the static check lets it pass) so
// the test needs no weir build; make image builds the real one.
func testOptions(t *testing.T) Options {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "weir")
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(bin, []byte("#!stand-in weir binary\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return Options{Binary: bin, CABundle: ca, Version: "v1.2.3", Revision: "0123456789abcdef",
		Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

// TestImageLayoutAndTarball builds the image, writes both outputs, reads each back and
// checks what a runtime would use: entrypoint, user, ports, labels, files and modes.
func TestImageLayoutAndTarball(t *testing.T) {
	o := testOptions(t)
	img, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := WriteLayout(filepath.Join(out, "oci"), "weir:v1.2.3", img); err != nil {
		t.Fatal(err)
	}
	if err := WriteTarball(filepath.Join(out, "weir.tar"), "weir:v1.2.3", img); err != nil {
		t.Fatal(err)
	}

	idx, err := layout.ImageIndexFromPath(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "weir:v1.2.3" {
		t.Fatalf("layout index: %+v", im.Manifests)
	}
	fromLayout, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := name.NewTag("weir:v1.2.3")
	fromTar, err := tarball.ImageFromPath(filepath.Join(out, "weir.tar"), &tag)
	if err != nil {
		t.Fatal(err)
	}
	for what, got := range map[string]v1.Image{"layout": fromLayout, "tarball": fromTar} {
		t.Run(what, func(t *testing.T) { checkImage(t, got, o) })
	}
	if mt, _ := fromLayout.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s, want OCI", mt)
	}

	// Same inputs, same digest (SOURCE_DATE_EPOCH builds are reproducible).
	again, err := Build(o)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := img.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds of the same inputs: %s and %s", d1, d2)
	}
}

func checkImage(t *testing.T, img v1.Image, o Options) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !reflect.DeepEqual(c.Entrypoint, []string{"/usr/local/bin/weir"}) {
		t.Errorf("entrypoint %q", c.Entrypoint)
	}
	if !reflect.DeepEqual(c.Cmd, DefaultCmd) {
		t.Errorf("cmd %q", c.Cmd)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q", c.User)
	}
	if c.WorkingDir != "/var/lib/weir" {
		t.Errorf("workdir %q", c.WorkingDir)
	}
	for _, p := range []string{"9092/tcp", "9644/tcp", "7946/udp", "9401/tcp"} {
		if _, ok := c.ExposedPorts[p]; !ok {
			t.Errorf("port %s not exposed: %v", p, c.ExposedPorts)
		}
	}
	want := map[string]string{
		"org.opencontainers.image.version":  "v1.2.3",
		"org.opencontainers.image.revision": "0123456789abcdef",
		"org.opencontainers.image.source":   "https://github.com/weir-io/weir",
		"org.opencontainers.image.created":  "2026-01-02T03:04:05Z",
	}
	for k, v := range want {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	if cf.OS != "linux" || cf.Architecture == "" {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}

	type file struct {
		mode     int64
		uid, gid int
		body     string
		dir      bool
	}
	files := map[string]file{}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files["/"+strings.TrimSuffix(h.Name, "/")] = file{mode: h.Mode & 0o7777, uid: h.Uid, gid: h.Gid, body: string(b), dir: h.Typeflag == tar.TypeDir}
	}
	bin, _ := os.ReadFile(o.Binary)
	ca, _ := os.ReadFile(o.CABundle)
	wantFiles := map[string]file{
		"/usr/local/bin/weir":                {mode: 0o755, body: string(bin)},
		"/etc/ssl/certs/ca-certificates.crt": {mode: 0o644, body: string(ca)},
		"/var/lib/weir":                      {mode: 0o700, uid: 65532, gid: 65532, dir: true},
		"/tmp":                               {mode: 0o1777, dir: true},
		"/etc":                               {mode: 0o755, dir: true},
	}
	for p, w := range wantFiles {
		got, ok := files[p]
		if !ok {
			t.Errorf("%s missing from the image", p)
			continue
		}
		if got != w {
			t.Errorf("%s: %+v, want %+v", p, got, w)
		}
	}
	if !strings.Contains(files["/etc/passwd"].body, "weir:x:65532:65532:") || !strings.Contains(files["/etc/group"].body, "weir:x:65532:") {
		t.Errorf("passwd/group do not name weir 65532:\n%s%s", files["/etc/passwd"].body, files["/etc/group"].body)
	}
}

// TestBuildRefusesDynamicBinary: a cgo build would not start on the empty base.
func TestBuildRefusesDynamicBinary(t *testing.T) {
	o := testOptions(t)
	o.Binary = "/bin/sh"
	if _, err := os.Stat(o.Binary); err != nil {
		t.Skip("no /bin/sh to stand for a dynamic binary")
	}
	if _, err := Build(o); !errors.Is(err, ErrDynamicBinary) {
		t.Fatalf("Build(/bin/sh) = %v, want ErrDynamicBinary", err)
	}
}

// TestDockerfileMatches: the Dockerfile, for users with an engine, builds the same image
// shape as Build: user, entrypoint, cmd, workdir, binary and CA paths, ports, labels.
func TestDockerfileMatches(t *testing.T) {
	f, err := os.Open("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var final []string // instructions of the last stage, continuation lines joined
	sc := bufio.NewScanner(f)
	cur := ""
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur == "" && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if s, ok := strings.CutSuffix(line, "\\"); ok {
			cur += s + " "
			continue
		}
		cur += line
		if strings.HasPrefix(strings.ToUpper(cur), "FROM ") {
			final = nil
		}
		final = append(final, cur)
		cur = ""
	}
	instr := func(kw string) []string {
		var out []string
		for _, l := range final {
			if k, rest, _ := strings.Cut(l, " "); strings.EqualFold(k, kw) {
				out = append(out, strings.TrimSpace(rest))
			}
		}
		return out
	}
	jsonArg := func(kw string) []string {
		v := instr(kw)
		if len(v) != 1 {
			t.Fatalf("%s: %d instructions in the final stage", kw, len(v))
		}
		var a []string
		if err := json.Unmarshal([]byte(v[0]), &a); err != nil {
			t.Fatalf("%s %s: %v (use the JSON form)", kw, v[0], err)
		}
		return a
	}
	if from := instr("FROM"); len(from) != 1 || !strings.Contains(from[0], "distroless/static") || !strings.Contains(from[0], "nonroot") {
		t.Errorf("final stage FROM %q, want distroless static nonroot", from)
	}
	if got := jsonArg("ENTRYPOINT"); !reflect.DeepEqual(got, []string{BinaryPath}) {
		t.Errorf("ENTRYPOINT %q, want %q", got, BinaryPath)
	}
	if got := jsonArg("CMD"); !reflect.DeepEqual(got, DefaultCmd) {
		t.Errorf("CMD %q, want %q", got, DefaultCmd)
	}
	if got := instr("USER"); !reflect.DeepEqual(got, []string{User}) {
		t.Errorf("USER %q, want %q", got, User)
	}
	if got := instr("WORKDIR"); !reflect.DeepEqual(got, []string{DataDir}) {
		t.Errorf("WORKDIR %q, want %q", got, DataDir)
	}
	copies := strings.Join(instr("COPY"), "\n")
	for _, p := range []string{" " + BinaryPath, " " + DataDir, "--chown=" + User} {
		if !strings.Contains(copies, p) {
			t.Errorf("no COPY with %q in the final stage:\n%s", p, copies)
		}
	}
	var ports []string
	for _, e := range instr("EXPOSE") {
		ports = append(ports, strings.Fields(e)...)
	}
	want := slices.Clone(ExposedPorts)
	slices.Sort(ports)
	slices.Sort(want)
	if !reflect.DeepEqual(ports, want) {
		t.Errorf("EXPOSE %q, want %q", ports, want)
	}
	labels := strings.Join(instr("LABEL"), " ")
	for k := range testOptions(t).Labels() {
		if !strings.Contains(labels, k+"=") {
			t.Errorf("LABEL %s missing", k)
		}
	}
}
