package wal

// PipeDepth is pipeDepth, for tests of the commit pipeline's backpressure.
const PipeDepth = pipeDepth
