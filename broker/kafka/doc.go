// Package kafka is the broker's Kafka front end: the listener and its connections, request
// framing, one registry of API keys (each handler file registers its key, version range
// and handler; ApiVersions and dispatch read the same table), one handler per API key, and
// the only translation of internal errors into Kafka error codes (errors.go).
//
// The handlers reach the rest of the broker only through Backend (backend.go): the
// metadata store, and for partition data a Writer (the append path) and a Reader (the read
// path). The broker's local partitions implement them today; a proxy-produce path and a
// same-zone read-replica path plug in beside them without the handlers changing.
//
// Connections: a reader goroutine parses requests in arrival order and queues a response
// slot for each; a writer goroutine sends the answers strictly in request order, as Kafka
// requires. Handlers that never block (Produce, ApiVersions, the group APIs, whose
// coordinator answers later from its own goroutines) run on the reader goroutine, so the
// produces of one connection reach the WAL in arrival order (idempotent pipelining
// depends on it). Handlers that may block on the controller, on object storage or on a
// long poll are registered as blocking and run on a goroutine of their own; their answer
// still goes out in request order.
//
// Lock rules: Server.connsMu guards the connection set and is a leaf. Handlers hold no
// lock of this package while calling the Backend.
package kafka
