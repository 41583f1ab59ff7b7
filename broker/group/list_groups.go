package group

// ListGroups (API key 16), versions 0-5.
//
// Behaviour: lists every group the coordinator owns (Config.Status), sorted by
// name, with its protocol type (empty for groups that only store offsets).
// v4+ report the state and filter by StatesFilter; v5+ report the group type
// ("classic") and filter by TypesFilter. Filters are case-insensitive and an
// empty filter matches everything. Groups being deleted are not listed.
// While a group partition is being restored (Config.Loading) the response
// carries COORDINATOR_LOAD_IN_PROGRESS with the groups of the other partitions,
// as Kafka's GroupCoordinator.handleListGroups does: clients (the Java admin
// client, kadm) retry on it rather than take an incomplete list.

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (c *Coordinator) handleListGroups(r *kmsg.ListGroupsRequest, respond func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.ListGroupsResponse)
	if c.cfg.Loading != nil && c.cfg.Loading() {
		resp.ErrorCode = kerr.CoordinatorLoadInProgress.Code
	}
	var states, types map[string]bool
	if r.Version >= 4 && len(r.StatesFilter) > 0 {
		states = make(map[string]bool)
		for _, s := range r.StatesFilter {
			states[strings.ToLower(s)] = true
		}
	}
	if r.Version >= 5 && len(r.TypesFilter) > 0 {
		types = make(map[string]bool)
		for _, t := range r.TypesFilter {
			types[strings.ToLower(t)] = true
		}
	}
	for _, g := range c.allGroups() {
		g.lock()
		state, ptype, removed := g.state, g.protocolType, g.removed
		gtype := groupType
		if g.cg != nil {
			gtype = consumerGroupType
		}
		g.unlock()
		if removed || state == stateDead || c.status(g.name) != Owned {
			continue
		}
		if types != nil && !types[gtype] {
			continue
		}
		if states != nil && !states[strings.ToLower(state.String())] {
			continue
		}
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group = g.name
		lg.ProtocolType = ptype
		lg.GroupState = state.String()
		lg.GroupType = gtype
		resp.Groups = append(resp.Groups, lg)
	}
	respond(resp)
}
