package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const configUsage = `Usage: weir config <describe|set|delete> --topic T | --broker ID [flags]

Topic and broker configs over the Kafka API (DescribeConfigs, IncrementalAlterConfigs),
as kafka-configs.sh and rpk do:

  describe --topic T | --broker ID [--all]   the non-default configs; --all: every config and its source
  set --topic T | --broker ID key=value...    set configs (IncrementalAlterConfigs SET)
  delete --topic T | --broker ID key...       remove configs: the default applies again (DELETE)

Topic configs are stored by the controllers and apply on every broker. Broker configs are
read-only in Weir: they are the flags the broker was started with (weir broker --help); a
broker answers set and delete with INVALID_REQUEST, and describe shows them as
STATIC_BROKER_CONFIG.

Every command takes --bootstrap (default 127.0.0.1:9092), --timeout, --json and the TLS
and SASL flags of a secured cluster. Run a command with --help for its flags.
`

// runConfig is weir config: see configUsage.
func runConfig(ctx context.Context, args []string, w io.Writer) error {
	sub, rest, ok := subcommand(w, configUsage, args)
	if !ok {
		return nil
	}
	switch sub {
	case "describe":
		return runConfigDescribe(ctx, rest, w)
	case "set", "delete":
		return runConfigAlter(ctx, sub, rest, w)
	}
	return fmt.Errorf("weir config: unknown command %q (weir config --help lists them)", sub)
}

// configResource is --topic or --broker, bound on a command's flags.
type configResource struct {
	topic, broker string
}

func (r *configResource) bind(c *kafkaCmd) {
	c.fs.StringVar(&r.topic, "topic", "", "the topic whose configs to work on")
	c.fs.StringVar(&r.broker, "broker", "", "the broker (its node ID, as weir admin describe lists them) whose configs to work on")
}

// resolve checks that exactly one of --topic and --broker was given.
func (r *configResource) resolve(cmd string) (kmsg.ConfigResourceType, string, error) {
	switch {
	case (r.topic == "") == (r.broker == ""):
		return 0, "", fmt.Errorf("%s: give --topic T or --broker ID (one of them)", cmd)
	case r.topic != "":
		return kmsg.ConfigResourceTypeTopic, r.topic, nil
	}
	if _, err := strconv.ParseInt(r.broker, 10, 32); err != nil {
		return 0, "", fmt.Errorf("%s: --broker is a node ID (a number), not %q", cmd, r.broker)
	}
	return kmsg.ConfigResourceTypeBroker, r.broker, nil
}

// resourceKind names a resource type as the commands print it.
func resourceKind(t kmsg.ConfigResourceType) string {
	if t == kmsg.ConfigResourceTypeBroker {
		return "broker"
	}
	return "topic"
}

// configEntry is one config as weir config describe and weir topic describe print it.
type configEntry struct {
	Name      string  `json:"name"`
	Value     *string `json:"value"`  // null when sensitive or unset
	Source    string  `json:"source"` // Kafka's names: DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG...
	ReadOnly  bool    `json:"read_only"`
	Sensitive bool    `json:"sensitive"`
}

func (e configEntry) value() string {
	switch {
	case e.Sensitive:
		return "(sensitive)"
	case e.Value == nil:
		return "-"
	}
	return *e.Value
}

// resourceConfigs are the configs of one topic or broker.
type resourceConfigs struct {
	Type    string        `json:"resource_type"` // topic or broker
	Name    string        `json:"resource_name"`
	Configs []configEntry `json:"configs"`
	itemErr
}

// describeConfigs asks for the configs of the named resources of one type, in the
// order named; all: every config, else those not at their default (Kafka's source
// DEFAULT_CONFIG). A broker resource goes to that broker (kgo shards the request), so
// a failure to reach one broker is that resource's error.
func describeConfigs(ctx context.Context, cl *kgo.Client, typ kmsg.ConfigResourceType, names []string, all bool) []resourceConfigs {
	req := kmsg.NewPtrDescribeConfigsRequest()
	for _, n := range names {
		rr := kmsg.NewDescribeConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = typ, n
		req.Resources = append(req.Resources, rr)
	}
	got := map[string]resourceConfigs{}
	for _, shard := range cl.RequestSharded(ctx, req) {
		if shard.Err != nil {
			for _, rr := range shard.Req.(*kmsg.DescribeConfigsRequest).Resources {
				got[rr.ResourceName] = resourceConfigs{itemErr: shardErr(shard.Err, typ, rr.ResourceName)}
			}
			continue
		}
		for _, r := range shard.Resp.(*kmsg.DescribeConfigsResponse).Resources {
			rc := resourceConfigs{Configs: []configEntry{},
				itemErr: newItemErr(kerr.ErrorForCode(r.ErrorCode), deref(r.ErrorMessage), subject(typ, r.ResourceName), "")}
			for _, c := range r.Configs {
				if !all && (c.IsDefault || c.Source == kmsg.ConfigSourceDefaultConfig) {
					continue
				}
				rc.Configs = append(rc.Configs, configEntry{Name: c.Name, Value: c.Value, Source: c.Source.String(), ReadOnly: c.ReadOnly, Sensitive: c.IsSensitive})
			}
			sort.Slice(rc.Configs, func(i, j int) bool { return rc.Configs[i].Name < rc.Configs[j].Name })
			got[r.ResourceName] = rc
		}
	}
	out := make([]resourceConfigs, 0, len(names))
	for _, n := range names {
		rc, ok := got[n]
		if !ok {
			rc.itemErr = newItemErr(errNoAnswer, "", subject(typ, n), "")
		}
		rc.Type, rc.Name = resourceKind(typ), n
		out = append(out, rc)
	}
	return out
}

// shardErr is a resource's error when its request could not be sent or answered: for a
// broker resource, often a broker ID not in the cluster.
func shardErr(err error, typ kmsg.ConfigResourceType, name string) itemErr {
	hint := ""
	if typ == kmsg.ConfigResourceTypeBroker {
		hint = "is broker " + name + " in the cluster, and up? weir admin describe lists the brokers"
	}
	return newItemErr(err, "", subject(typ, name), hint)
}

// subject is how hints name a resource: a topic by its name, a broker as "broker N".
func subject(typ kmsg.ConfigResourceType, name string) string {
	if typ == kmsg.ConfigResourceTypeBroker {
		return "broker " + name
	}
	return name
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
