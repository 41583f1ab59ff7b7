package test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/weir-io/weir/security/tlstest"
)

// `weir broker` with an SSL main listener requiring client certificates
// (--listen-protocol SSL --tls-client-auth require) and a named PLAINTEXT listener:
// kcat (librdkafka) without a certificate is refused, with one it produces and consumes
// over SSL, and the plaintext listener serves the same topic.
func TestBrokerSSLListenerProcess(t *testing.T) {
	// One standalone broker process of its own, light on the CPU: runs beside the
	// package's other parallel tests, after the cluster tests (see proc_test.go).
	t.Parallel()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("WEIR_REQUIRE_KCAT") != "" {
			t.Fatal("kcat is required (WEIR_REQUIRE_KCAT) but not installed")
		}
		t.Skip("kcat not installed")
	}
	dir := t.TempDir()
	ca, err := tlstest.NewCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ca.Issue("broker", "broker")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := ca.Issue("client", "alice")
	if err != nil {
		t.Fatal(err)
	}
	plain := "127.0.0.1:" + strconv.Itoa(freePort(t))
	p := startWeir(t, dir, "", "--listen-protocol", "SSL", "--listener", "PLAIN=PLAINTEXT://"+plain,
		"--tls-cert", srv.CertFile, "--tls-key", srv.KeyFile, "--tls-ca", ca.CAFile, "--tls-client-auth", "require")

	run := func(ok bool, stdin string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctxT(t, 90e9), kcat, args...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if ok && err != nil {
			t.Fatalf("kcat %v: %v\nstdout: %s\nstderr: %s", args, err, out.String(), errb.String())
		}
		if !ok && err == nil {
			t.Fatalf("kcat %v succeeded:\n%s", args, out.String())
		}
		return out.String()
	}
	ssl := []string{"-b", p.addr, "-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + ca.CAFile}
	withCert := append(append([]string{}, ssl...), "-X", "ssl.certificate.location="+cl.CertFile, "-X", "ssl.key.location="+cl.KeyFile)

	run(false, "", append(ssl, "-m", "5", "-L")...)
	if md := run(true, "", append(withCert, "-L")...); !strings.Contains(md, p.addr) {
		t.Fatalf("kcat -L over SSL does not name %s:\n%s", p.addr, md)
	}
	var lines []string
	for i := 0; i < 40; i++ {
		lines = append(lines, fmt.Sprintf("mtls-%02d", i))
	}
	run(true, strings.Join(lines, "\n")+"\n", append(withCert, "-P", "-t", "mtls", "-X", "acks=all")...)
	for _, args := range [][]string{withCert, {"-b", plain}} {
		out := run(true, "", append(args, "-C", "-t", "mtls", "-o", "beginning", "-e", "-f", "%s\n")...)
		if got := strings.TrimSpace(out); got != strings.Join(lines, "\n") {
			t.Fatalf("kcat %v read:\n%s", args[:2], got)
		}
	}
}
