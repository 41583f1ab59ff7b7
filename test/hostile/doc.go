// Package hostile runs one standalone weir broker process and attacks it the way a
// shared network can: hundreds of connections announcing 100 MiB requests and sending
// nothing, slow writers, a fetch asking for 2 GiB, floods of pipelined requests,
// connection floods over the per-address limit and random frames. Meanwhile a
// well-behaved franz-go producer and consumer must keep working (every record acked and
// read back) and the broker's resident memory must stay under a stated bound.
package hostile
