package kafka

// share_config.go: the share groups' per-group configs (Kafka 4.2's GroupConfig keys
// share.*) on ConfigResource type GROUP (32) of DescribeConfigs and
// IncrementalAlterConfigs, served by any broker (the values live in
// __share_group_state: broker/share config_store.go).
//
//   - DescribeConfigs: every share.* key with the group's effective value: its own with
//     source GROUP_CONFIG (8), else the broker's with DEFAULT_CONFIG and is_default. A
//     group never configured (or that does not exist) shows the defaults, as Kafka.
//     DescribeConfigs on the group.
//   - IncrementalAlterConfigs: SET and DELETE (APPEND and SUBTRACT need a list key:
//     INVALID_CONFIG), validated as a whole against the broker's bounds (--share-min-*,
//     --share-max-*) and the session timeout above the heartbeat interval; one bad key
//     changes nothing (INVALID_CONFIG with the reason). consumer.* group keys are not
//     served (INVALID_CONFIG). AlterConfigs on the group; validate_only writes nothing.
//
// A change is seen at once by this broker and within 5 s by the others (each reads a
// group's configs again after that long).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker/share"
	"github.com/weir-io/weir/security/acl"
)

const resourceGroup = 32

// describeGroupConfigs answers one GROUP resource of DescribeConfigs.
func (s *Server) describeGroupConfigs(ctx context.Context, rr kmsg.DescribeConfigsRequestResource, docs bool, sr *kmsg.DescribeConfigsResponseResource) {
	if code, msg := s.groupConfigCheck(ctx, acl.OpDescribeConfigs, rr.ResourceName); code != 0 {
		sr.ErrorCode, sr.ErrorMessage = code, msg
		return
	}
	set, _, err := s.share.Configs.Overrides(ctx, rr.ResourceName)
	if err != nil {
		sr.ErrorCode, sr.ErrorMessage = shareCode(err), errMessage(err)
		return
	}
	eff, err := share.Apply(s.share.Configs.Defaults(), share.Bounds{}, set)
	if err != nil { // a value stored under other flags: show it as stored
		eff = s.share.Configs.Defaults()
	}
	want := wanted(rr.ConfigNames)
	for _, k := range share.ConfigKeys {
		if !want(k.Name) {
			continue
		}
		c := kmsg.NewDescribeConfigsResponseResourceConfig()
		c.Name = k.Name
		v, own := set[k.Name]
		if !own {
			v = eff.Value(k.Name)
		}
		c.Value = &v
		c.Source, c.IsDefault = kmsg.ConfigSourceDefaultConfig, !own
		if own {
			c.Source = kmsg.ConfigSourceGroupConfig
		}
		c.ConfigType = kmsg.ConfigTypeString
		if k.Int {
			c.ConfigType = kmsg.ConfigTypeInt
		}
		if docs {
			d := k.Doc
			c.Documentation = &d
		}
		sr.Configs = append(sr.Configs, c)
	}
}

// alterGroupConfigs answers one GROUP resource of IncrementalAlterConfigs.
func (s *Server) alterGroupConfigs(ctx context.Context, rr kmsg.IncrementalAlterConfigsRequestResource, validateOnly bool, sr *kmsg.IncrementalAlterConfigsResponseResource) {
	if code, msg := s.groupConfigCheck(ctx, acl.OpAlterConfigs, rr.ResourceName); code != 0 {
		sr.ErrorCode, sr.ErrorMessage = code, msg
		return
	}
	ops := make([]share.ConfigOp, 0, len(rr.Configs))
	for _, c := range rr.Configs {
		op := share.ConfigOp{Key: c.Name, Op: int8(c.Op)}
		if c.Value != nil {
			op.Value = *c.Value
		}
		ops = append(ops, op)
	}
	if err := s.share.Configs.Alter(ctx, rr.ResourceName, ops, validateOnly, s.now()); err != nil {
		sr.ErrorCode, sr.ErrorMessage = shareCode(err), errMessage(err)
	}
}

// groupConfigCheck checks a GROUP resource: share groups served, a name, op on the
// group. It returns the code (and message) to answer.
func (s *Server) groupConfigCheck(ctx context.Context, op acl.Operation, group string) (int16, *string) {
	msg := func(m string) *string { return &m }
	switch {
	case s.share == nil:
		return kerr.InvalidRequest.Code, msg("group configs are the share groups', which this broker does not serve (--share-groups=false)")
	case group == "":
		return kerr.InvalidRequest.Code, msg("a group config resource needs a group name")
	case !acl.Allowed(ctx, op, acl.ResourceGroup, group):
		return kerr.GroupAuthorizationFailed.Code, nil
	}
	return 0, nil
}
