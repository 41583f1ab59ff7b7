package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"testing"
)

func TestDNIsTheFullSubject(t *testing.T) {
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"acme"}, Country: []string{"US"}}}
	cs := tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{cert}}}
	if got := DN(cs); got != "CN=alice,OU=eng,O=acme,C=US" {
		t.Fatalf("DN %q", got)
	}
	if DN(tls.ConnectionState{}) != "" {
		t.Fatal("DN without a certificate")
	}
	// Two certificates with the same CN in other OUs are other principals by default.
	other := &x509.Certificate{Subject: pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"contractors"}, Organization: []string{"acme"}, Country: []string{"US"}}}
	var none PrincipalRules
	a, _ := none.Principal(cs)
	b, _ := none.Principal(tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{other}}})
	if a == b {
		t.Fatalf("same principal %q for two OUs", a)
	}
}

// TestPrincipalMappingRules: Kafka's ssl.principal.mapping.rules examples.
func TestPrincipalMappingRules(t *testing.T) {
	rules, err := ParsePrincipalRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,
		RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,
		RULE:^cn=(.*?),ou=(.*?)$/$1\/$2/U,
		DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=Duke,OU=ServiceUsers,O=Org,C=US":        "Duke",
		"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US": "duke@sme",
		"cn=duke,ou=sme":                            "DUKE/SME",
		"CN=Other,O=x":                              "CN=Other,O=x",
	} {
		if got, err := rules.Map(dn); err != nil || got != want {
			t.Errorf("Map(%q) = %q, %v; want %q", dn, got, err, want)
		}
	}
	strict, err := ParsePrincipalRules("RULE:^CN=([^,]*),O=acme$/$1/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := strict.Map("CN=alice,O=evil"); !errors.Is(err, ErrNoRule) {
		t.Fatalf("no matching rule: %v, want ErrNoRule", err)
	}
	for _, bad := range []string{"RULE:^CN=(.*)$", "RULE:^CN=(.*)$/$1", "RULE:(/x/", "NOPE", "RULE:a/b/X"} {
		if _, err := ParsePrincipalRules(bad); !errors.Is(err, ErrConfig) {
			t.Errorf("ParsePrincipalRules(%q): %v, want ErrConfig", bad, err)
		}
	}
}
