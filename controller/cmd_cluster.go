package controller

// initClusterCmd sets the cluster ID; the first leader proposes it with a random ID.
// Later ones are no-ops, so the ID never changes.
type initClusterCmd struct {
	ClusterID string `json:"cluster_id"`
}

func (*initClusterCmd) kind() cmdType { return cmdInitCluster }

func (c *initClusterCmd) apply(m *machine) (any, bool, error) {
	if m.st.ClusterID != "" || c.ClusterID == "" {
		return m.st.ClusterID, false, nil
	}
	m.st.ClusterID = c.ClusterID
	return c.ClusterID, true, nil
}
