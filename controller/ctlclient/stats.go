package ctlclient

// Stats counts what a Client did: for tests, benchmarks and debugging.
type Stats struct {
	// Retries counts the calls' attempts that failed and were tried again.
	Retries int64
	// DeltaViews and FullViews count the Views the metadata watch installed from
	// deltas and from full Views.
	DeltaViews, FullViews int64
}

// Stats returns the client's counts so far.
func (c *Client) Stats() Stats {
	return Stats{Retries: c.retries.Load(), DeltaViews: c.deltas.Load(), FullViews: c.fulls.Load()}
}

// PauseHeartbeats stops (true) or resumes (false) the heartbeats without closing
// anything, as a hung process would: fault-injection tests make a broker look dead to
// the controllers with it while the process goes on. A paused client's lease runs out
// as it would.
func (c *Client) PauseHeartbeats(paused bool) { c.hbPaused.Store(paused) }
