package acl

import (
	"flag"
	"fmt"
	"strings"

	"github.com/weir-io/weir/security"
	"github.com/weir-io/weir/security/tlsconf"
)

// Config turns the authorizer on and configures it (Kafka: authorizer.class.name,
// super.users, allow.everyone.if.no.acl.found).
type Config struct {
	// Authorizer is "" (off: every request is allowed, the ACL APIs answer
	// SECURITY_DISABLED) or "acl".
	Authorizer string
	// SuperUsers may do anything, whatever the ACLs say.
	SuperUsers []security.Principal
	// AllowEveryoneIfNoACLFound allows a request on a resource that has no ACL at all
	// (default false: such a resource is closed to all but super users).
	AllowEveryoneIfNoACLFound bool
	// PrincipalMappingRules map a TLS client certificate's subject DN to its principal
	// name (Kafka's ssl.principal.mapping.rules, security/tlsconf); empty: DEFAULT, the
	// full DN, e.g. User:CN=alice,OU=eng,O=acme.
	PrincipalMappingRules string
}

// PrincipalRules returns the parsed PrincipalMappingRules (DEFAULT if they do not parse:
// Validate reports that).
func (c *Config) PrincipalRules() tlsconf.PrincipalRules {
	r, _ := tlsconf.ParsePrincipalRules(c.PrincipalMappingRules)
	return r
}

// DefaultConfig is the authorizer off.
func DefaultConfig() Config { return Config{} }

// Validate checks the authorizer name and the super users' principals.
func (c *Config) Validate() error {
	if c.Authorizer != "" && c.Authorizer != "acl" {
		return fmt.Errorf("acl: --authorizer %q: want \"acl\" or nothing", c.Authorizer)
	}
	if _, err := tlsconf.ParsePrincipalRules(c.PrincipalMappingRules); err != nil {
		return fmt.Errorf("acl: --ssl-principal-mapping-rules: %w", err)
	}
	for _, p := range c.SuperUsers {
		if !validPrincipal(p) {
			return fmt.Errorf("acl: super user %q: want Type:name, e.g. User:admin", p)
		}
	}
	return nil
}

// New returns the configured authorizer, nil when it is off.
func (c *Config) New() *Authorizer {
	if c.Authorizer == "" {
		return nil
	}
	return NewAuthorizer(c.SuperUsers, c.AllowEveryoneIfNoACLFound)
}

// ParseSuperUsers parses Kafka's super.users form: principals separated by ';'.
func ParseSuperUsers(s string) ([]security.Principal, error) {
	var out []security.Principal
	for _, f := range strings.Split(s, ";") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if !validPrincipal(security.Principal(f)) {
			return nil, fmt.Errorf("acl: super user %q: want Type:name, e.g. User:admin", f)
		}
		out = append(out, security.Principal(f))
	}
	return out, nil
}

// BindFlags registers --authorizer, --super-users and --allow-everyone-if-no-acl-found.
func (c *Config) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Authorizer, "authorizer", c.Authorizer, `"acl" turns on ACL authorization of every Kafka request (default off: everyone may do everything, and CreateAcls/DescribeAcls/DeleteAcls answer SECURITY_DISABLED); `+
		`the ACLs live in the cluster metadata (weir admin acl, kafka-acls, kadm)`)
	fs.Func("super-users", `principals allowed everything whatever the ACLs say, ';'-separated (Kafka's super.users), e.g. "User:admin;User:weir"; `+
		`the first ACLs are created by a super user (or with weir admin acl through the controller API)`, func(s string) error {
		ps, err := ParseSuperUsers(s)
		c.SuperUsers = ps
		return err
	})
	fs.StringVar(&c.PrincipalMappingRules, "ssl-principal-mapping-rules", c.PrincipalMappingRules,
		"Kafka's ssl.principal.mapping.rules: how a TLS client certificate's subject DN becomes its principal, RULE:pattern/replacement/[LU],...,DEFAULT "+
			`(default DEFAULT: the full DN, e.g. User:CN=alice,OU=eng; RULE:^CN=([^,]*)(,.*)?$/$1/ names users by CN alone)`)
	fs.BoolVar(&c.AllowEveryoneIfNoACLFound, "allow-everyone-if-no-acl-found", c.AllowEveryoneIfNoACLFound,
		"allow a request on a resource that has no ACL at all (Kafka's allow.everyone.if.no.acl.found); default: only super users may use it")
}
