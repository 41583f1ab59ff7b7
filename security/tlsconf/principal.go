package tlsconf

import (
	"crypto/tls"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Principals of client certificates, as Kafka computes them: the certificate subject's
// distinguished name in RFC 2253 form ("CN=alice,OU=eng,O=acme"), mapped by
// ssl.principal.mapping.rules. The CN alone would let two certificates of one CA with
// the same CN in different OUs or organisations be the same principal.

// ErrNoRule: no mapping rule matched a certificate's DN (Kafka refuses the connection).
var ErrNoRule = errors.New("tlsconf: no principal mapping rule matches the certificate's DN")

// DN is the subject of the verified client certificate of a TLS connection state in RFC
// 2253 form, "" when there is none.
func DN(cs tls.ConnectionState) string {
	if len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return ""
	}
	return cs.VerifiedChains[0][0].Subject.ToRDNSequence().String()
}

// PrincipalRules are parsed ssl.principal.mapping.rules: a comma- or newline-separated
// list of `RULE:pattern/replacement/[LU]` and `DEFAULT`. The first rule whose pattern
// matches the whole DN gives the name (replacement with $1-style groups, then L lower
// or U upper case); DEFAULT gives the DN unchanged. The zero value is DEFAULT alone.
type PrincipalRules struct {
	rules []principalRule
}

type principalRule struct {
	def         bool
	re          *regexp.Regexp
	replacement string
	toCase      byte // 0, 'L' or 'U'
}

// ParsePrincipalRules parses Kafka's ssl.principal.mapping.rules syntax.
func ParsePrincipalRules(s string) (PrincipalRules, error) {
	var pr PrincipalRules
	for {
		s = strings.TrimLeft(s, " \t\r\n,")
		if s == "" {
			return pr, nil
		}
		switch {
		case strings.HasPrefix(s, "DEFAULT"):
			pr.rules = append(pr.rules, principalRule{def: true})
			s = s[len("DEFAULT"):]
		case strings.HasPrefix(s, "RULE:"):
			s = s[len("RULE:"):]
			pat, rest, ok := cutUnescaped(s)
			if !ok {
				return pr, fmt.Errorf("%w: principal mapping rule %q: want RULE:pattern/replacement/[LU]", ErrConfig, "RULE:"+s)
			}
			repl, rest, ok := cutUnescaped(rest)
			if !ok {
				return pr, fmt.Errorf("%w: principal mapping rule %q: want RULE:pattern/replacement/[LU]", ErrConfig, "RULE:"+s)
			}
			re, err := regexp.Compile("^(?:" + pat + ")$")
			if err != nil {
				return pr, fmt.Errorf("%w: principal mapping rule pattern %q: %v", ErrConfig, pat, err)
			}
			r := principalRule{re: re, replacement: repl}
			if rest != "" && (rest[0] == 'L' || rest[0] == 'U') {
				r.toCase, rest = rest[0], rest[1:]
			}
			pr.rules = append(pr.rules, r)
			s = rest
		default:
			return pr, fmt.Errorf("%w: principal mapping rules: unexpected %q (want RULE:pattern/replacement/[LU] or DEFAULT)", ErrConfig, s)
		}
		if t := strings.TrimLeft(s, " \t"); t != "" && t[0] != ',' && t[0] != '\n' && t[0] != '\r' {
			return pr, fmt.Errorf("%w: principal mapping rules: unexpected %q after a rule", ErrConfig, t)
		}
	}
}

// cutUnescaped splits s at its first '/' not preceded by a backslash; `\/` in the part
// becomes '/'.
func cutUnescaped(s string) (string, string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == '/':
			b.WriteByte('/')
			i++
		case s[i] == '\\' && i+1 < len(s):
			b.WriteString(s[i : i+2])
			i++
		case s[i] == '/':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(s[i])
		}
	}
	return "", "", false
}

// Map returns the principal name of a DN.
func (pr PrincipalRules) Map(dn string) (string, error) {
	if len(pr.rules) == 0 {
		return dn, nil
	}
	for _, r := range pr.rules {
		if r.def {
			return dn, nil
		}
		if !r.re.MatchString(dn) {
			continue
		}
		name := r.re.ReplaceAllString(dn, r.replacement)
		switch r.toCase {
		case 'L':
			name = strings.ToLower(name)
		case 'U':
			name = strings.ToUpper(name)
		}
		return name, nil
	}
	return "", fmt.Errorf("%w: %q", ErrNoRule, dn)
}

// Principal is the mapped principal name of a connection's verified client certificate
// ("" and no error when there is none).
func (pr PrincipalRules) Principal(cs tls.ConnectionState) (string, error) {
	dn := DN(cs)
	if dn == "" {
		return "", nil
	}
	return pr.Map(dn)
}
