package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const configSetHelp = `Usage: weir config set --topic T | --broker ID key=value... [flags]

Sets configs (IncrementalAlterConfigs, op SET); the others keep their values. A bad key
or value fails the whole change (INVALID_CONFIG) and changes nothing.

Examples:
  weir config set --topic orders retention.ms=86400000 cleanup.policy=delete
`

const configDeleteHelp = `Usage: weir config delete --topic T | --broker ID key... [flags]

Removes configs (IncrementalAlterConfigs, op DELETE): their defaults apply again.

Examples:
  weir config delete --topic orders retention.ms
`

// alteredConfigs is the result of weir config set or delete.
type alteredConfigs struct {
	Type    string            `json:"resource_type"`
	Name    string            `json:"resource_name"`
	Op      string            `json:"op"`      // set or delete
	Configs map[string]string `json:"configs"` // key to value (set) or to "" (delete)
	Status  string            `json:"status"`  // updated, valid (--dry-run), failed
	itemErr
}

// brokerConfigsHint explains Weir's answer to a change of a broker config.
const brokerConfigsHint = "Weir's broker configs are read-only: they are the flags the broker was started with, see weir broker --help; change the flag and restart the broker"

func runConfigAlter(ctx context.Context, op string, args []string, w io.Writer) error {
	cmd := "config " + op
	help := configSetHelp
	if op == "delete" {
		help = configDeleteHelp
	}
	c := newKafkaCmd("weir "+cmd, help, w)
	var res configResource
	res.bind(c)
	dry := c.fs.Bool("dry-run", false, "ask the broker to validate the change without making it (validate_only)")
	items, helped, err := c.parse(args)
	if helped || err != nil {
		return err
	}
	typ, name, err := res.resolve(cmd)
	if err != nil {
		return err
	}
	if len(items) == 0 {
		return fmt.Errorf("%s: name the configs to %s (weir %s --help)", cmd, op, cmd)
	}
	out := alteredConfigs{Type: resourceKind(typ), Name: name, Op: op, Configs: map[string]string{}, Status: "updated"}
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	var shown []string // the table's CONFIGS column
	for _, it := range items {
		shown = append(shown, it)
		rc := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		rc.Op = kmsg.IncrementalAlterConfigOpDelete
		rc.Name = it
		if op == "set" {
			k, v, err := parseKV(it)
			if err != nil {
				return fmt.Errorf("%s: %w", cmd, err)
			}
			rc.Op, rc.Name, rc.Value = kmsg.IncrementalAlterConfigOpSet, k, kmsg.StringPtr(v)
		}
		out.Configs[rc.Name] = deref(rc.Value)
		rr.Configs = append(rr.Configs, rc)
	}
	ctx, cl, _, done, err := c.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = *dry
	req.Resources = append(req.Resources, rr)
	out.itemErr = alterResult(ctx, cl, req, typ, name)
	switch {
	case out.failed():
		out.Status = "failed"
	case *dry:
		out.Status = "valid"
	}
	err = c.emit(w, out, func(tw io.Writer) {
		fmt.Fprintln(tw, "RESOURCE\tSTATUS\tCONFIGS\tERROR")
		fmt.Fprintf(tw, "%s %s\t%s\t%s\t%s\n", out.Type, out.Name, out.Status, strings.Join(shown, " "), out.cell())
	})
	if err != nil {
		return err
	}
	var fail failures
	fail.add(out.Type+" "+out.Name, out.itemErr)
	return fail.err(cmd, "")
}

// alterResult sends req (one resource) and returns the resource's outcome.
func alterResult(ctx context.Context, cl *kgo.Client, req *kmsg.IncrementalAlterConfigsRequest, typ kmsg.ConfigResourceType, name string) itemErr {
	who := subject(typ, name)
	for _, shard := range cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			return shardErr(shard.Err, typ, name)
		}
		for _, r := range shard.Resp.(*kmsg.IncrementalAlterConfigsResponse).Resources {
			if r.ResourceName != name {
				continue
			}
			err, hint := kerr.ErrorForCode(r.ErrorCode), ""
			if typ == kmsg.ConfigResourceTypeBroker && errors.Is(err, kerr.InvalidRequest) {
				hint = brokerConfigsHint
			}
			return newItemErr(err, deref(r.ErrorMessage), who, hint)
		}
	}
	return newItemErr(errNoAnswer, "", who, "")
}
