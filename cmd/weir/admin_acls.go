package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/weir-io/weir/security"
	"github.com/weir-io/weir/security/acl"
)

// `weir admin acl`: the cluster's ACLs through the controller API, so the first ACLs can
// be created before any Kafka client is allowed anything (the other way in is a super
// user with kafka-acls or kadm).

const aclHelp = `Usage: weir admin acl add|list|delete [flags]

  add     store the bindings: every --operation for --principal on the resource
  list    print the bindings that match the flags given (none: all)
  delete  remove the bindings that match the flags given (a resource or --principal is required)

The ACLs are enforced by brokers started with --authorizer acl (see --super-users and
--allow-everyone-if-no-acl-found). Examples:

  weir admin acl add --principal User:alice --operation read,describe --topic orders
  weir admin acl add --principal User:alice --operation read --group orders- --pattern prefixed
  weir admin acl add --principal User:bob --deny --operation write --topic orders
  weir admin acl add --principal User:ops --operation alter,describe --cluster
  weir admin acl list --principal User:alice
  weir admin acl delete --principal User:bob --topic orders

Flags:
`

type aclFlags struct {
	principal, host, operations, pattern string
	topic, group, txn                    string
	cluster, deny                        bool
}

func runAdminACL(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" || args[0] == "help" {
		fmt.Fprint(out, aclHelp)
		return nil
	}
	cmd := args[0]
	fs := flag.NewFlagSet("weir admin acl "+cmd, flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { fmt.Fprint(out, aclHelp); fs.PrintDefaults() }
	var f aclFlags
	var cc ctlConn
	cc.bind(fs) // --controllers, --timeout, --cluster-token-file, --controller-tls-*: a secured cluster's API
	fs.StringVar(&f.principal, "principal", "", "the principal, Type:name (User:alice; User:* is every user)")
	fs.StringVar(&f.host, "host", "", `the client host the binding applies to (add: default "*", any)`)
	fs.StringVar(&f.operations, "operation", "", "comma-separated operations: read, write, create, delete, alter, describe, cluster_action, describe_configs, alter_configs, idempotent_write, all")
	fs.StringVar(&f.pattern, "pattern", "", "resource pattern type: literal (add's default: the exact name, or * for every name) or prefixed (every name starting with it); list and delete: any unless given")
	fs.StringVar(&f.topic, "topic", "", "the resource is this topic")
	fs.StringVar(&f.group, "group", "", "the resource is this consumer group")
	fs.StringVar(&f.txn, "transactional-id", "", "the resource is this transactional id")
	fs.BoolVar(&f.cluster, "cluster", false, "the resource is the cluster (kafka-cluster)")
	fs.BoolVar(&f.deny, "deny", false, "add: a DENY binding (default ALLOW); list and delete: only DENY bindings")
	ctx, cl, done, err := cc.start(ctx, fs, args[1:])
	if cl == nil {
		return err
	}
	defer done()
	switch cmd {
	case "add":
		bs, err := f.bindings()
		if err != nil {
			return err
		}
		if err := cl.CreateACLs(ctx, bs); err != nil {
			return err
		}
		fmt.Fprintf(out, "%d bindings stored\n", len(bs))
		printBindings(out, bs)
	case "list":
		flt, err := f.filter(false)
		if err != nil {
			return err
		}
		all, err := cl.ACLs(ctx)
		if err != nil {
			return err
		}
		printBindings(out, acl.NewSet(all).Select(flt))
	case "delete":
		flt, err := f.filter(true)
		if err != nil {
			return err
		}
		matched, err := cl.DeleteACLs(ctx, []acl.Filter{flt})
		if err != nil {
			return err
		}
		var gone []acl.Binding
		for _, m := range matched {
			gone = append(gone, m...)
		}
		fmt.Fprintf(out, "%d bindings deleted\n", len(gone))
		printBindings(out, gone)
	default:
		return fmt.Errorf("unknown acl command %q\n\n%s", cmd, aclHelp)
	}
	return nil
}

// resource is the one resource the flags name (ok false: none).
func (f *aclFlags) resource() (acl.ResourceType, string, bool, error) {
	var rt acl.ResourceType
	var name string
	n := 0
	if f.topic != "" {
		rt, name, n = acl.ResourceTopic, f.topic, n+1
	}
	if f.group != "" {
		rt, name, n = acl.ResourceGroup, f.group, n+1
	}
	if f.txn != "" {
		rt, name, n = acl.ResourceTransactionalID, f.txn, n+1
	}
	if f.cluster {
		rt, name, n = acl.ResourceCluster, acl.ClusterName, n+1
	}
	if n > 1 {
		return 0, "", false, errors.New("name one resource: --topic, --group, --transactional-id or --cluster")
	}
	return rt, name, n == 1, nil
}

func (f *aclFlags) ops() ([]acl.Operation, error) {
	var out []acl.Operation
	for _, s := range strings.Split(f.operations, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		op, err := acl.ParseOperation(s)
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
	return out, nil
}

func (f *aclFlags) bindings() ([]acl.Binding, error) {
	rt, name, ok, err := f.resource()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errors.New("add needs a resource: --topic, --group, --transactional-id or --cluster")
	}
	ops, err := f.ops()
	if err != nil {
		return nil, err
	}
	if f.principal == "" || len(ops) == 0 {
		return nil, errors.New("add needs --principal and --operation")
	}
	pt := acl.PatternLiteral
	if f.pattern != "" {
		if pt, err = acl.ParsePatternType(f.pattern); err != nil {
			return nil, err
		}
	}
	host := f.host
	if host == "" {
		host = acl.Wildcard
	}
	perm := acl.Allow
	if f.deny {
		perm = acl.Deny
	}
	var out []acl.Binding
	for _, op := range ops {
		b := acl.Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: security.Principal(f.principal), Host: host, Operation: op, Permission: perm}
		if err := b.Validate(); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func (f *aclFlags) filter(narrow bool) (acl.Filter, error) {
	flt := acl.Filter{ResourceType: acl.ResourceAny, PatternType: acl.PatternAny, Operation: acl.OpAny, Permission: acl.PermissionAny}
	rt, name, ok, err := f.resource()
	if err != nil {
		return flt, err
	}
	if ok {
		flt.ResourceType, flt.ResourceName = rt, &name
	}
	if narrow && !ok && f.principal == "" {
		return flt, errors.New("delete needs a resource (--topic, --group, --transactional-id, --cluster) or --principal")
	}
	if f.pattern != "" {
		if flt.PatternType, err = acl.ParsePatternType(f.pattern); err != nil {
			return flt, err
		}
	}
	if f.principal != "" {
		p := security.Principal(f.principal)
		flt.Principal = &p
	}
	if f.host != "" {
		flt.Host = &f.host
	}
	if f.deny {
		flt.Permission = acl.Deny
	}
	ops, err := f.ops()
	if err != nil {
		return flt, err
	}
	if len(ops) > 1 {
		return flt, errors.New("list and delete take at most one --operation")
	}
	if len(ops) == 1 {
		flt.Operation = ops[0]
	}
	return flt, flt.Validate()
}

func printBindings(out io.Writer, bs []acl.Binding) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PRINCIPAL\tPERMISSION\tOPERATION\tRESOURCE\tNAME\tPATTERN\tHOST")
	for _, b := range bs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.Principal, b.Permission, b.Operation, b.ResourceType, b.ResourceName, b.PatternType, b.Host)
	}
	w.Flush()
}
