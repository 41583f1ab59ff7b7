package broker

import (
	"net"

	"github.com/weir-io/weir/broker/kafka"
)

// ServeExtraListener serves the Kafka protocol on ln, described by l (SASL, TLS), beside
// the listeners Start bound; ln is closed with the broker. Metadata keeps naming the
// broker's advertised address, so a client of ln must be sent back to it (tests point
// AdvertisedAddr at ln, or redirect their dialer).
func (b *Broker) ServeExtraListener(ln net.Listener, l kafka.Listener) {
	b.front.ServeListener(ln, l)
}
