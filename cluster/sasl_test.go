package cluster

import (
	"context"
	"errors"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/controller/ctlclient"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/sasl"
)

// TestSASLUsersThroughRaft: the first user (admin) is created through the controller
// API, as `weir admin user set` does, without any SASL; admin logs in over SASL listeners
// and creates alice with kadm (AlterUserScramCredentials, through Raft); alice logs in
// with SCRAM-SHA-512 on every broker, produces and consumes; DescribeUserScramCredentials
// shows both users; a deleted user can no longer log in.
//
// Each broker serves a SASL listener beside its main one, and the clients' dialer sends
// every main address to that broker's SASL listener, so no request reaches a broker
// unauthenticated.
func TestSASLUsersThroughRaft(t *testing.T) {
	c := startCluster(t, nil)
	redirect := map[string]string{}
	for i := 0; i < 3; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		n := c.Broker(i)
		n.Broker.ServeExtraListener(ln, kafka.Listener{SASL: true})
		adv := n.Broker.Advertised()
		redirect[net.JoinHostPort(adv.Host, strconv.Itoa(int(adv.Port)))] = ln.Addr().String()
	}
	dial := func(ctx context.Context, network, host string) (net.Conn, error) {
		to, ok := redirect[host]
		if !ok {
			return nil, errors.New("dial of an address that is not a broker's: " + host)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, to)
	}
	client := func(m scram.Auth, sha512 bool, opts ...kgo.Opt) *kgo.Client {
		mech := m.AsSha256Mechanism()
		if sha512 {
			mech = m.AsSha512Mechanism()
		}
		return newClient(t, c, append([]kgo.Opt{kgo.Dialer(dial), kgo.SASL(mech)}, opts...)...)
	}

	// Bootstrap: the controller API, no SASL.
	ccfg := ctlclient.DefaultClientConfig()
	ccfg.Controllers = c.APIAddrs()
	admin, err := ctlclient.NewClient(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	cred, err := sasl.NewCredential(sasl.ScramSHA256, "admin-pw", 4096)
	if err != nil {
		t.Fatal(err)
	}
	res, err := admin.AlterScram(ctxFor(t, 30*time.Second), []metadata.ScramAlteration{{User: "admin", Mechanism: metadata.ScramSHA256,
		Credential: metadata.ScramCredential{Mechanism: metadata.ScramSHA256, Iterations: 4096, Salt: cred.Salt, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("bootstrap: %v %v", res, err)
	}
	everyBrokerKnows := func(user string, want bool) {
		testutil.Eventually(t, 20*time.Second, "every broker's view of "+user, func() bool {
			for i := 0; i < 3; i++ {
				if known := len(c.Broker(i).Client.View().Scram[user]) > 0; known != want {
					return false
				}
			}
			return true
		})
	}
	everyBrokerKnows("admin", true)

	admCl := client(scram.Auth{User: "admin", Pass: "admin-pw"}, false)
	adm := kadm.NewClient(admCl)
	ctx := ctxFor(t, 60*time.Second)
	alter, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "alice-pw"}})
	if err != nil {
		t.Fatal(err)
	}
	if r := alter["alice"]; r.Err != nil {
		t.Fatalf("alter alice: %v", r.Err)
	}
	everyBrokerKnows("alice", true)

	alice := client(scram.Auth{User: "alice", Pass: "alice-pw"}, true, kgo.DefaultProduceTopic("sasl-raft"), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics("sasl-raft"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for i := 0; i < 5; i++ {
		if err := alice.ProduceSync(ctx, &kgo.Record{Value: []byte{byte('a' + i)}}).FirstErr(); err != nil {
			t.Fatalf("alice produce: %v", err)
		}
	}
	got := 0
	for got < 5 {
		fs := alice.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatal(err)
		}
		got += fs.NumRecords()
	}
	// alice logs in on every broker (each checks against its own View).
	for i := 0; i < 3; i++ {
		id := c.Broker(i).Broker.Advertised().ID
		if _, err := alice.Broker(int(id)).Request(ctx, kmsg.NewPtrMetadataRequest()); err != nil {
			t.Fatalf("alice on broker %d: %v", id, err)
		}
	}
	desc, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a := desc["alice"]; a.Err != nil || len(a.CredInfos) != 1 || a.CredInfos[0].Mechanism != kadm.ScramSha512 || a.CredInfos[0].Iterations != 8192 {
		t.Fatalf("describe alice: %+v", a)
	}
	if a := desc["admin"]; a.Err != nil || len(a.CredInfos) != 1 || a.CredInfos[0].Mechanism != kadm.ScramSha256 {
		t.Fatalf("describe admin: %+v", a)
	}
	if d, err := adm.DescribeUserSCRAMs(ctx, "nobody"); err != nil || !errors.Is(d["nobody"].Err, kerr.ResourceNotFound) {
		t.Fatalf("describe nobody: %+v %v", d, err)
	}
	// Kafka's refusals, per user.
	// Kafka's refusals, per user (kadm checks iterations itself: a raw request).
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	del0 := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	del0.Name, del0.Mechanism = "nobody", 1
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = "weak", 1, 1000, []byte("salt"), make([]byte, 32)
	up2 := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up2.Name, up2.Mechanism, up2.Iterations, up2.Salt, up2.SaltedPassword = "odd", 3, 4096, []byte("salt"), make([]byte, 32)
	req.Deletions = append(req.Deletions, del0)
	req.Upsertions = append(req.Upsertions, up, up2)
	resp, err := req.RequestWith(ctx, admCl)
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]int16{}
	for _, r := range resp.Results {
		codes[r.User] = r.ErrorCode
	}
	if codes["nobody"] != kerr.ResourceNotFound.Code || codes["weak"] != kerr.UnacceptableCredential.Code || codes["odd"] != kerr.UnsupportedSaslMechanism.Code {
		t.Fatalf("refusals: %v", codes)
	}

	// Deleted: alice can no longer log in anywhere.
	del, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || del["alice"].Err != nil {
		t.Fatalf("delete alice: %+v %v", del, err)
	}
	everyBrokerKnows("alice", false)
	late := client(scram.Auth{User: "alice", Pass: "alice-pw"}, true)
	if err := late.Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("deleted alice: %v", err)
	}
}
