package wal

// PipeDepth is pipeDepth, for tests of the commit pipeline's backpressure.
const PipeDepth = pipeDepth

// Queued is the number of entries waiting for the committer.
func (w *WAL) Queued() int {
	w.qmu.Lock()
	defer w.qmu.Unlock()
	return len(w.queue)
}
