// Package acl is Weir's ACL model and authorizer, with Kafka's rules (kafka.security.
// authorizer.AclAuthorizer / StandardAuthorizer): bindings of a resource pattern
// (resource type, name, LITERAL or PREFIXED), a principal, a host, an operation and a
// permission (ALLOW or DENY); a DENY that matches wins over any ALLOW; super users may
// do anything; Describe is implied by Read, Write, Delete and Alter, DescribeConfigs by
// AlterConfigs; the principal "User:*", the host "*" and the literal resource name "*"
// match everything. A resource with no binding at all is denied unless
// allow.everyone.if.no.acl.found is set.
//
// Bindings live in the cluster's metadata (metadata.View.ACLs, an immutable Set with an
// index by resource type and name built once per View); the broker asks the Authorizer
// on every request. The enumerations use Kafka's wire codes, so converting to and from
// kmsg is a cast.
package acl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/weir-io/weir/security"
)

// ErrInvalid: a binding or filter that cannot be stored or used (an unknown or ANY
// value where a specific one is needed, an operation the resource type does not have, a
// malformed principal). Answered with INVALID_REQUEST at the protocol edge.
var ErrInvalid = errors.New("acl: invalid binding")

// ClusterName is the name of the one cluster resource, as in Kafka.
const ClusterName = "kafka-cluster"

// Wildcard is the literal resource name, principal name and host matching every one.
const Wildcard = "*"

// WildcardPrincipal matches every user.
const WildcardPrincipal security.Principal = "User:*"

// ResourceType is Kafka's ACL resource type (wire code).
type ResourceType int8

const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

var resourceNames = []string{"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}

// PatternType is how a binding's resource name matches (wire code). MATCH and ANY are
// for filters only.
type PatternType int8

const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

var patternNames = []string{"UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED"}

// Operation is Kafka's ACL operation (wire code).
type Operation int8

const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

var operationNames = []string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
	"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS"}

// Permission is ALLOW or DENY (wire code); ANY for filters.
type Permission int8

const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1
	Deny              Permission = 2
	Allow             Permission = 3
)

var permissionNames = []string{"UNKNOWN", "ANY", "DENY", "ALLOW"}

func name(names []string, v int8) string {
	if v >= 0 && int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("UNKNOWN(%d)", v)
}

// parse finds s among names, ignoring case, '_' and '-' (so "transactional-id",
// "TransactionalId" and "TRANSACTIONAL_ID" are one). UNKNOWN is never parsed.
func parse(names []string, what, s string) (int8, error) {
	norm := func(x string) string { return strings.NewReplacer("_", "", "-", "").Replace(strings.ToUpper(x)) }
	n := norm(s)
	for i, v := range names {
		if i > 0 && norm(v) == n {
			return int8(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown %s %q (one of %s)", ErrInvalid, what, s, strings.Join(names[1:], ", "))
}

func (r ResourceType) String() string { return name(resourceNames, int8(r)) }
func (p PatternType) String() string  { return name(patternNames, int8(p)) }
func (o Operation) String() string    { return name(operationNames, int8(o)) }
func (p Permission) String() string   { return name(permissionNames, int8(p)) }

// ParseResourceType parses a resource type name (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, ...).
func ParseResourceType(s string) (ResourceType, error) {
	v, err := parse(resourceNames, "resource type", s)
	return ResourceType(v), err
}

// ParsePatternType parses LITERAL, PREFIXED, MATCH or ANY.
func ParsePatternType(s string) (PatternType, error) {
	v, err := parse(patternNames, "pattern type", s)
	return PatternType(v), err
}

// ParseOperation parses an operation name (READ, WRITE, DESCRIBE_CONFIGS, ALL, ...).
func ParseOperation(s string) (Operation, error) {
	v, err := parse(operationNames, "operation", s)
	return Operation(v), err
}

// ParsePermission parses ALLOW, DENY or ANY.
func ParsePermission(s string) (Permission, error) {
	v, err := parse(permissionNames, "permission", s)
	return Permission(v), err
}

// The enumerations are JSON strings in the metadata and the controller API, so the
// stored state reads like kafka-acls output and survives a renumbering nobody will do.

func (r ResourceType) MarshalText() ([]byte, error) { return []byte(r.String()), nil }
func (p PatternType) MarshalText() ([]byte, error)  { return []byte(p.String()), nil }
func (o Operation) MarshalText() ([]byte, error)    { return []byte(o.String()), nil }
func (p Permission) MarshalText() ([]byte, error)   { return []byte(p.String()), nil }

func (r *ResourceType) UnmarshalText(b []byte) (err error) {
	*r, err = ParseResourceType(string(b))
	return err
}
func (p *PatternType) UnmarshalText(b []byte) (err error) {
	*p, err = ParsePatternType(string(b))
	return err
}
func (o *Operation) UnmarshalText(b []byte) (err error) {
	*o, err = ParseOperation(string(b))
	return err
}
func (p *Permission) UnmarshalText(b []byte) (err error) {
	*p, err = ParsePermission(string(b))
	return err
}

// Binding is one ACL: Principal may do (Allow) or may not do (Deny) Operation on the
// resources of ResourceType whose name is ResourceName (LITERAL) or starts with it
// (PREFIXED), when connecting from Host ("*": anywhere).
type Binding struct {
	ResourceType ResourceType       `json:"resource_type"`
	ResourceName string             `json:"resource_name"`
	PatternType  PatternType        `json:"pattern_type"`
	Principal    security.Principal `json:"principal"`
	Host         string             `json:"host"`
	Operation    Operation          `json:"operation"`
	Permission   Permission         `json:"permission"`
}

func (b Binding) String() string {
	return fmt.Sprintf("%s %s %s:%s %s from %s %s", b.Principal, b.Permission, b.ResourceType, b.ResourceName, b.Operation, b.Host, b.PatternType)
}

// supported lists the operations of each resource type (ALL included), as Kafka's
// AclEntry.supportedOperations does: a binding of another is refused.
var supported = map[ResourceType][]Operation{
	ResourceTopic:           {OpRead, OpWrite, OpCreate, OpDescribe, OpDelete, OpAlter, OpDescribeConfigs, OpAlterConfigs},
	ResourceGroup:           {OpRead, OpDescribe, OpDelete},
	ResourceCluster:         {OpCreate, OpClusterAction, OpDescribeConfigs, OpAlterConfigs, OpIdempotentWrite, OpAlter, OpDescribe},
	ResourceTransactionalID: {OpDescribe, OpWrite},
	ResourceDelegationToken: {OpDescribe},
	ResourceUser:            {OpCreateTokens, OpDescribeTokens},
}

// validPrincipal: "Type:name", both parts non-empty.
func validPrincipal(p security.Principal) bool {
	t, n, ok := strings.Cut(string(p), ":")
	return ok && t != "" && n != ""
}

// Validate reports why b cannot be stored, wrapping ErrInvalid.
func (b Binding) Validate() error {
	ops, ok := supported[b.ResourceType]
	if !ok {
		return fmt.Errorf("%w: resource type %s (want TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID, DELEGATION_TOKEN or USER)", ErrInvalid, b.ResourceType)
	}
	if b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed {
		return fmt.Errorf("%w: pattern type %s (want LITERAL or PREFIXED)", ErrInvalid, b.PatternType)
	}
	if b.ResourceName == "" {
		return fmt.Errorf("%w: empty resource name", ErrInvalid)
	}
	if b.ResourceType == ResourceCluster && b.ResourceName != ClusterName {
		return fmt.Errorf("%w: the cluster resource is named %q, not %q", ErrInvalid, ClusterName, b.ResourceName)
	}
	if b.PatternType == PatternPrefixed && b.ResourceName == Wildcard {
		return fmt.Errorf("%w: the wildcard name %q is LITERAL, not PREFIXED", ErrInvalid, Wildcard)
	}
	if !validPrincipal(b.Principal) {
		return fmt.Errorf("%w: principal %q (want Type:name, e.g. User:alice or User:*)", ErrInvalid, b.Principal)
	}
	if b.Host == "" {
		return fmt.Errorf("%w: empty host (use %q for any)", ErrInvalid, Wildcard)
	}
	if b.Permission != Allow && b.Permission != Deny {
		return fmt.Errorf("%w: permission %s (want ALLOW or DENY)", ErrInvalid, b.Permission)
	}
	if b.Operation == OpAll {
		return nil
	}
	for _, o := range ops {
		if o == b.Operation {
			return nil
		}
	}
	return fmt.Errorf("%w: operation %s is not one of %s's", ErrInvalid, b.Operation, b.ResourceType)
}

// Filter selects bindings (DescribeAcls, DeleteAcls): ANY values and nil strings match
// everything. PatternType MATCH with a name selects the bindings that apply to a
// resource of that name: the literal one, the literal "*" and every prefix.
type Filter struct {
	ResourceType ResourceType        `json:"resource_type"`
	ResourceName *string             `json:"resource_name,omitempty"`
	PatternType  PatternType         `json:"pattern_type"`
	Principal    *security.Principal `json:"principal,omitempty"`
	Host         *string             `json:"host,omitempty"`
	Operation    Operation           `json:"operation"`
	Permission   Permission          `json:"permission"`
}

// Validate reports a filter with an UNKNOWN value.
func (f Filter) Validate() error {
	switch {
	case f.ResourceType <= ResourceUnknown || f.ResourceType > ResourceUser:
		return fmt.Errorf("%w: filter resource type %s", ErrInvalid, f.ResourceType)
	case f.PatternType <= PatternUnknown || f.PatternType > PatternPrefixed:
		return fmt.Errorf("%w: filter pattern type %s", ErrInvalid, f.PatternType)
	case f.Operation <= OpUnknown || f.Operation > OpDescribeTokens:
		return fmt.Errorf("%w: filter operation %s", ErrInvalid, f.Operation)
	case f.Permission <= PermissionUnknown || f.Permission > Allow:
		return fmt.Errorf("%w: filter permission %s", ErrInvalid, f.Permission)
	}
	return nil
}

// Matches reports whether the filter selects b.
func (f Filter) Matches(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.Operation != OpAny && f.Operation != b.Operation {
		return false
	}
	if f.Permission != PermissionAny && f.Permission != b.Permission {
		return false
	}
	if f.Principal != nil && *f.Principal != b.Principal {
		return false
	}
	if f.Host != nil && *f.Host != b.Host {
		return false
	}
	switch f.PatternType {
	case PatternAny:
		return f.ResourceName == nil || *f.ResourceName == b.ResourceName
	case PatternMatch:
		if f.ResourceName == nil {
			return true
		}
		n := *f.ResourceName
		if b.PatternType == PatternLiteral {
			return b.ResourceName == n || b.ResourceName == Wildcard
		}
		return strings.HasPrefix(n, b.ResourceName)
	default:
		return f.PatternType == b.PatternType && (f.ResourceName == nil || *f.ResourceName == b.ResourceName)
	}
}
