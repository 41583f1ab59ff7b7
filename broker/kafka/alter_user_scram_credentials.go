package kafka

import (
	"fmt"

	"github.com/weir-io/weir/security/acl"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/sasl"
)

// AlterUserScramCredentials (key 51), version 0: deletions and upsertions of SCRAM
// credentials, applied by the metadata store (the controllers through Raft, or the
// standalone broker's LocalStore) with Kafka's rules (metadata/scram.go). The salted
// password of an upsertion stops here: this handler derives StoredKey and ServerKey from
// it, and only those reach the store. Results are per user. Blocking: it waits on the
// store.
func init() {
	register(api{key: 51, min: 0, max: 0, blocking: true, handle: handleAlterUserScram})
}

func handleAlterUserScram(s *Server, c *conn, sl *slot, req kmsg.Request) {
	r := req.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := r.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var alts []metadata.ScramAlteration
	// Deletions first, then upsertions: the order in which Kafka's controller reads them
	// (which decides whose alteration counts as the duplicate).
	for _, d := range r.Deletions {
		alts = append(alts, metadata.ScramAlteration{User: d.Name, Mechanism: metadata.ScramMechanism(d.Mechanism), Delete: true})
	}
	for _, u := range r.Upsertions {
		m := metadata.ScramMechanism(u.Mechanism)
		a := metadata.ScramAlteration{User: u.Name, Mechanism: m}
		if m.Valid() && len(u.SaltedPassword) == m.KeySize() {
			cr := sasl.CredentialFromSalted(m.String(), u.SaltedPassword, u.Salt, int(u.Iterations))
			a.Credential = metadata.ScramCredential{Mechanism: m, Iterations: u.Iterations, Salt: cr.Salt, StoredKey: cr.StoredKey, ServerKey: cr.ServerKey}
		} else if m.Valid() {
			// Keys of the wrong size: the store refuses it as UNACCEPTABLE_CREDENTIAL.
			a.Credential = metadata.ScramCredential{Mechanism: m, Iterations: u.Iterations, Salt: u.Salt}
		}
		alts = append(alts, a)
	}
	answerAll := func(err error) {
		seen := map[string]bool{}
		for _, a := range alts {
			if seen[a.User] {
				continue
			}
			seen[a.User] = true
			res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
			res.User, res.ErrorCode, res.ErrorMessage = a.User, scramCode(err), errMessage(err)
			resp.Results = append(resp.Results, res)
		}
		sl.respond(resp)
	}
	// Alter on the cluster, as Kafka asks (with the authorizer off: anyone).
	if !allowedCluster(s.withSession(c.ctx, c), acl.OpAlter) {
		answerAll(kerr.ClusterAuthorizationFailed)
		return
	}
	store, ok := s.meta.(metadata.ScramStore)
	if !ok {
		answerAll(kerr.UnsupportedVersion)
		return
	}
	if len(alts) > metadata.MaxScramAlterations {
		answerAll(fmt.Errorf("%w: more than %d alterations in one request", metadata.ErrScramCredential, metadata.MaxScramAlterations))
		return
	}
	if len(alts) == 0 {
		sl.respond(resp)
		return
	}
	results, err := store.AlterScram(c.ctx, alts)
	if err != nil {
		answerAll(err)
		return
	}
	for _, rr := range results {
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = rr.User
		if rr.Err != nil {
			res.ErrorCode, res.ErrorMessage = scramCode(rr.Err), errMessage(rr.Err)
		}
		resp.Results = append(resp.Results, res)
	}
	sl.respond(resp)
}
