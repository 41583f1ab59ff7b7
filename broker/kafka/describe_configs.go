package kafka

// DescribeConfigs (key 32), versions 0-4.
//
// Topic resources list every catalogue key with its effective value; explicitly set keys
// have source DYNAMIC_TOPIC_CONFIG, the rest DEFAULT_CONFIG. Broker resources (type 4)
// list the broker's static settings (source STATIC_BROKER_CONFIG). config_names selects
// keys (null: all); v3+ add types and documentation when asked. Synonyms are not kept.
// Group resources (type 32) show the share groups' configs (share_config.go).

import (
	"context"

	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/security/acl"
)

const (
	resourceTopic  = 2
	resourceBroker = 4

	sourceDynamicTopic = 1
	sourceStaticBroker = 4
	sourceDefault      = 5
)

func init() {
	register(api{key: 32, min: 0, max: 4, handle: answer((*Server).handleDescribeConfigs)})
}

func (s *Server) handleDescribeConfigs(ctx context.Context, req *kmsg.DescribeConfigsRequest) *kmsg.DescribeConfigsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	view := s.meta.View()
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		switch rr.ResourceType {
		case resourceTopic:
			if !allowedTopic(ctx, acl.OpDescribeConfigs, rr.ResourceName) {
				sr.ErrorCode = kerr.TopicAuthorizationFailed.Code
				break
			}
			t := view.Topics[rr.ResourceName]
			if t == nil {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			sr.Configs = describeTopicConfigs(t, rr.ConfigNames, req.IncludeDocumentation)
		case resourceBroker:
			if !allowedCluster(ctx, acl.OpDescribeConfigs) {
				sr.ErrorCode = kerr.ClusterAuthorizationFailed.Code
				break
			}
			if rr.ResourceName != "" && rr.ResourceName != strconv.Itoa(int(s.cfg.NodeID)) {
				sr.ErrorCode = kerr.InvalidRequest.Code
				msg := "unknown broker " + rr.ResourceName
				sr.ErrorMessage = &msg
				break
			}
			sr.Configs = s.describeBrokerConfigs(rr.ConfigNames)
		case resourceGroup: // share groups' configs (share_config.go)
			s.describeGroupConfigs(ctx, rr, req.IncludeDocumentation, &sr)
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			msg := "unsupported resource type " + strconv.Itoa(int(rr.ResourceType))
			sr.ErrorMessage = &msg
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp
}

func wanted(names []string) func(string) bool {
	if names == nil {
		return func(string) bool { return true }
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return func(k string) bool { return set[k] }
}

func describeTopicConfigs(t *metadata.Topic, names []string, docs bool) []kmsg.DescribeConfigsResponseResourceConfig {
	keys := make([]string, 0, len(metadata.TopicConfigs))
	for k := range metadata.TopicConfigs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := wanted(names)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, k := range keys {
		if !want(k) {
			continue
		}
		v, set := t.Config(k)
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = k
		val := v
		c.Value = &val
		c.Source = sourceDefault
		c.IsDefault = !set
		if set {
			c.Source = sourceDynamicTopic
		}
		c.ConfigType = configType(k, metadata.TopicConfigs[k].Default)
		if docs && metadata.TopicConfigs[k].Doc != "" {
			d := metadata.TopicConfigs[k].Doc
			c.Documentation = &d
		}
		out = append(out, c)
	}
	return out
}

func (s *Server) describeBrokerConfigs(names []string) []kmsg.DescribeConfigsResponseResourceConfig {
	static := s.cfg.BrokerConfigs
	keys := make([]string, 0, len(static))
	for k := range static {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := wanted(names)
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, k := range keys {
		if !want(k) {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		v := static[k]
		c.Name, c.Value, c.ReadOnly, c.Source = k, &v, true, sourceStaticBroker
		c.ConfigType = configType(k, v)
		out = append(out, c)
	}
	return out
}

// configType guesses Kafka's ConfigType from a default value: BOOLEAN 1, STRING 2,
// LONG 5, DOUBLE 6, LIST 7.
func configType(key, def string) kmsg.ConfigType {
	if key == "cleanup.policy" {
		return 7
	}
	if def == "true" || def == "false" {
		return 1
	}
	if _, err := strconv.ParseInt(def, 10, 64); err == nil {
		return 5
	}
	if _, err := strconv.ParseFloat(def, 64); err == nil {
		return 6
	}
	return 2
}
