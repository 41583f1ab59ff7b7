package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/weir-io/weir/security/tlsconf"
)

// TestGroupSecureCluster: weir group against SASL_SSL listeners (as `weir dev --secure`
// runs them) with the client flags of kafkaCLI; without them the command fails.
func TestGroupSecureCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, sec := startSecureDev(t, ctx)
	src, err := tlsconf.New(tlsconf.Files{CAFile: sec.caFile}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cl := newTestClient(t, c, kgo.DialTLSConfig(src.Client()),
		kgo.SASL(scram.Auth{User: devAdmin, Pass: sec.password}.AsSha512Mechanism()))
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "secure"); err != nil {
		t.Fatalf("create: %v", err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "secure"}, &kgo.Record{Topic: "secure"}, &kgo.Record{Topic: "secure"}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	if err := adm.CommitAllOffsets(ctx, "sec-app", kadm.OffsetsFromRecords(kgo.Record{Topic: "secure", Offset: 0})); err != nil {
		t.Fatalf("commit: %v", err)
	}

	flags := []string{"--bootstrap", c.Bootstrap(), "--timeout", "5s", "--tls-ca", sec.caFile,
		"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", devAdmin, "--sasl-password", sec.password}
	var out bytes.Buffer
	if err := runGroup(ctx, append([]string{"describe", "sec-app"}, flags...), &out); err != nil {
		t.Fatalf("describe with TLS and SASL: %v\n%s", err, out.String())
	}
	if row := tableRow(out.String(), "secure", "0"); cells(row, 2) != "1 3 2 - - -" {
		t.Errorf("describe over SASL_SSL: row %q\n%s", row, out.String())
	}
	out.Reset()
	if err := runGroup(ctx, append([]string{"reset-offsets", "sec-app", "--topic", "secure", "--to-latest", "--execute"}, flags...), &out); err != nil {
		t.Fatalf("reset with TLS and SASL: %v\n%s", err, out.String())
	}
	if o, err := adm.FetchOffsets(ctx, "sec-app"); err != nil || o["secure"][0].At != 3 {
		t.Errorf("after --to-latest: %v %v", o, err)
	}
	// Without SASL the broker closes the connection: an error (franz-go's names SASL), not an empty list.
	err = runGroup(ctx, []string{"list", "--bootstrap", c.Bootstrap(), "--timeout", "3s", "--tls-ca", sec.caFile}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "SASL") {
		t.Errorf("list without SASL credentials: %v, want an error that names SASL", err)
	}
}
