package group

// GroupInfo is one group as ListGroups reports it, for metrics and tools.
type GroupInfo struct {
	Name         string
	State        string // Empty, PreparingRebalance, CompletingRebalance or Stable
	ProtocolType string // "" for groups that only store offsets
	Members      int
}

// Groups lists the live groups this coordinator owns and has restored (the ones ListGroups
// answers with), sorted by name. Like ListGroups, it never holds a group lock while asking
// Config.Status.
func (c *Coordinator) Groups() []GroupInfo {
	var out []GroupInfo
	for _, g := range c.allGroups() {
		g.lock()
		info := GroupInfo{Name: g.name, State: g.state.String(), ProtocolType: g.protocolType, Members: len(g.members)}
		removed, dead := g.removed, g.state == stateDead
		g.unlock()
		if removed || dead || c.status(g.name) != Owned {
			continue
		}
		out = append(out, info)
	}
	return out
}
