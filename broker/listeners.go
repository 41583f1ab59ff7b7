package broker

import (
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/weir-io/weir/broker/kafka"
	"github.com/weir-io/weir/metadata"
	"github.com/weir-io/weir/routing"
	"github.com/weir-io/weir/security/tlsconf"
)

// A broker's Kafka listeners: the main one (--listen, --listen-protocol), the named
// ones (--listener NAME=PROTOCOL://host:port, Kafka's listeners) and the zone ones
// (--zone-listener zone=[PROTOCOL://]host:port, named after their zone). Each has a
// security protocol; the TLS ones (SSL, SASL_SSL) share one certificate (--tls-cert,
// --tls-key), reloaded when its files change, and one client CA (--tls-ca,
// --tls-client-auth).

// NamedListener is one extra named Kafka listener.
type NamedListener struct {
	// Name keys the listener: a client connected to it is told every broker's listener
	// of that name (spelled as zones are; unique among a broker's listeners).
	Name string
	// Protocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.
	Protocol string
	// Listen is the address to bind, host:port.
	Listen string
	// Advertise is the address clients are told (default: the bound address).
	Advertise string
}

// String is the --listener form: NAME=PROTOCOL://listen[/advertise].
func (l NamedListener) String() string {
	s := l.Name + "=" + l.Protocol + "://" + l.Listen
	if l.Advertise != "" {
		s += "/" + l.Advertise
	}
	return s
}

// ParseNamedListener parses NAME=PROTOCOL://host:port[/advertised-host:port].
func ParseNamedListener(s string) (NamedListener, error) {
	name, rest, ok := strings.Cut(s, "=")
	proto, addrs, err := cutProtocol(rest)
	if !ok || err != nil || proto == "" {
		return NamedListener{}, fmt.Errorf("listener %q: want NAME=PROTOCOL://host:port[/advertised-host:port] with PROTOCOL one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL", s)
	}
	listen, adv, _ := strings.Cut(addrs, "/")
	l := NamedListener{Name: name, Protocol: proto, Listen: listen, Advertise: adv}
	return l, l.validate()
}

func (l NamedListener) validate() error {
	if !routing.ValidZone(l.Name) {
		return fmt.Errorf("listener %q: invalid name %q", l, l.Name)
	}
	if l.Protocol == "" || !metadata.ValidProtocol(l.Protocol) {
		return fmt.Errorf("listener %q: unknown security protocol %q", l, l.Protocol)
	}
	return validAddrs(l.String(), l.Listen, l.Advertise)
}

// validAddrs checks a listener's bind and advertised addresses.
func validAddrs(what, listen, adv string) error {
	if _, _, err := net.SplitHostPort(listen); err != nil {
		return fmt.Errorf("listener %q: listen address %q: %w", what, listen, err)
	}
	if adv != "" {
		if h, p, err := net.SplitHostPort(adv); err != nil || h == "" || p == "0" {
			return fmt.Errorf("listener %q: advertised address %q must be host:port", what, adv)
		}
	}
	return nil
}

// cutProtocol splits an optional "PROTOCOL://" off addrs (case-insensitive; "" none).
func cutProtocol(addrs string) (proto, rest string, err error) {
	p, rest, ok := strings.Cut(addrs, "://")
	if !ok {
		return "", addrs, nil
	}
	p = strings.ToUpper(p)
	if p == "" || !metadata.ValidProtocol(p) {
		return "", "", fmt.Errorf("unknown security protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", p)
	}
	return p, rest, nil
}

func protocolTLS(p string) bool {
	return p == metadata.ProtocolSSL || p == metadata.ProtocolSASLSSL
}

func protocolSASL(p string) bool {
	return p == metadata.ProtocolSASLPlaintext || p == metadata.ProtocolSASLSSL
}

// protocols are the security protocols of every listener, the main one first.
func (c *Config) protocols() []string {
	ps := []string{c.ListenProtocol}
	for _, l := range c.ZoneListeners {
		ps = append(ps, l.Protocol)
	}
	for _, l := range c.Listeners {
		ps = append(ps, l.Protocol)
	}
	return ps
}

// needsTLS reports whether any listener is SSL or SASL_SSL.
func (c *Config) needsTLS() bool {
	for _, p := range c.protocols() {
		if protocolTLS(p) {
			return true
		}
	}
	return false
}

// validateListeners checks what the zone listeners' own checks do not: the protocols,
// the named listeners, names unique among zone and named listeners, their count, and
// the TLS files every TLS listener needs.
func (c *Config) validateListeners() error {
	if c.ListenProtocol != "" {
		c.ListenProtocol = strings.ToUpper(c.ListenProtocol)
	}
	if !metadata.ValidProtocol(c.ListenProtocol) {
		return fmt.Errorf("broker: --listen-protocol %q: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", c.ListenProtocol)
	}
	if n := len(c.ZoneListeners) + len(c.Listeners); n > metadata.MaxListeners {
		return fmt.Errorf("broker: %d zone and named listeners, at most %d", n, metadata.MaxListeners)
	}
	names := map[string]bool{}
	for _, l := range c.ZoneListeners {
		if !metadata.ValidProtocol(l.Protocol) {
			return fmt.Errorf("broker: zone listener %q: unknown security protocol %q", l, l.Protocol)
		}
		names[l.Zone] = true
	}
	for _, l := range c.Listeners {
		if err := l.validate(); err != nil {
			return fmt.Errorf("broker: %w", err)
		}
		if names[l.Name] {
			return fmt.Errorf("broker: two listeners named %q (a zone listener is named after its zone)", l.Name)
		}
		names[l.Name] = true
	}
	if err := c.TLS.Validate(); err != nil {
		return fmt.Errorf("broker: %w", err)
	}
	if c.needsTLS() && (c.TLS.CertFile == "" || c.TLS.KeyFile == "") {
		return fmt.Errorf("broker: %w: an SSL or SASL_SSL listener needs --tls-cert and --tls-key", tlsconf.ErrConfig)
	}
	return nil
}

// namedListenersFlag is the repeatable --listener.
type namedListenersFlag struct{ c *Config }

func (f namedListenersFlag) String() string {
	if f.c == nil {
		return ""
	}
	s := make([]string, len(f.c.Listeners))
	for i, l := range f.c.Listeners {
		s[i] = l.String()
	}
	return strings.Join(s, ",")
}

func (f namedListenersFlag) Set(s string) error {
	l, err := ParseNamedListener(s)
	if err != nil {
		return err
	}
	f.c.Listeners = append(f.c.Listeners, l)
	return nil
}

// bindListenerFlags registers --listen-protocol, --listener and the TLS files.
func (c *Config) bindListenerFlags(fs *flag.FlagSet) {
	if c.ListenProtocol == "" {
		c.ListenProtocol = metadata.ProtocolPlaintext
	}
	fs.StringVar(&c.ListenProtocol, "listen-protocol", c.ListenProtocol, "security protocol of the --listen listener: PLAINTEXT, SSL (TLS: --tls-cert, --tls-key), SASL_PLAINTEXT or SASL_SSL")
	fs.Var(namedListenersFlag{c}, "listener", "an extra named Kafka listener, NAME=PROTOCOL://host:port[/advertised-host:port] (repeatable; PROTOCOL: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL), "+
		"e.g. EXTERNAL=SSL://0.0.0.0:9093/broker1.example.com:9093: Metadata answered there names every broker's listener of that name (else its main address), so its clients stay on that protocol")
	c.TLS.BindFlags(fs, "", "the SSL and SASL_SSL Kafka listeners")
}

// newTLSSource loads the listeners' certificate when a listener needs it (nil: none).
// It also warns of a main listener that is not PLAINTEXT: the main address is the one
// other brokers' peer connections and the consumer-lag collector dial, in plaintext and
// without SASL, until the inter-broker connections speak the listener's protocol.
func (c *Config) newTLSSource(log *slog.Logger) (*tlsconf.Source, error) {
	if c.ListenProtocol != "" && c.ListenProtocol != metadata.ProtocolPlaintext {
		log.Warn("the main listener is not PLAINTEXT: inter-broker connections and the consumer-lag metrics dial it in plaintext and fail; "+
			"in a cluster keep --listen PLAINTEXT on a private network and serve clients on a named --listener", "protocol", c.ListenProtocol)
	}
	if !c.needsTLS() {
		return nil, nil
	}
	src, err := tlsconf.New(c.TLS, log)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	return src, nil
}

// kafkaListener describes one listener to the front end.
func (b *Broker) kafkaListener(name, zone, proto string) kafka.Listener {
	l := kafka.Listener{Name: name, Zone: zone, SASL: protocolSASL(proto)}
	if protocolTLS(proto) {
		l.TLS = b.tls.Server()
	}
	return l
}

// bindNamed binds the named listeners (after the main and zone ones).
func (b *Broker) bindNamed() error {
	for _, nl := range b.cfg.Listeners {
		ln, err := net.Listen("tcp", nl.Listen)
		if err != nil {
			return fmt.Errorf("broker: listen %s (listener %s): %w", nl.Listen, nl.Name, err)
		}
		b.nlns = append(b.nlns, ln)
	}
	return nil
}

// serveListeners hands every bound listener to the front end.
func (b *Broker) serveListeners() {
	b.front.ServeListener(b.ln, b.kafkaListener("", "", b.cfg.ListenProtocol))
	for i, zln := range b.zlns {
		zl := b.cfg.ZoneListeners[i]
		b.front.ServeListener(zln, b.kafkaListener(zl.Zone, zl.Zone, zl.Protocol))
	}
	for i, ln := range b.nlns {
		nl := b.cfg.Listeners[i]
		b.front.ServeListener(ln, b.kafkaListener(nl.Name, "", nl.Protocol))
	}
}

// namedAdvertised are the named listeners as registered.
func (b *Broker) namedAdvertised() []metadata.Listener {
	var ls []metadata.Listener
	for i, nl := range b.cfg.Listeners {
		var ln net.Listener
		if i < len(b.nlns) {
			ln = b.nlns[i]
		}
		h, p := advertised(nl.Advertise, ln, nl.Listen)
		ls = append(ls, metadata.Listener{Name: nl.Name, Protocol: nl.Protocol, Host: h, Port: p})
	}
	return ls
}

// NamedAddrs are the bound addresses of the named listeners, by name (useful with port
// 0 in tests).
func (b *Broker) NamedAddrs() map[string]net.Addr {
	m := make(map[string]net.Addr, len(b.nlns))
	for i, ln := range b.nlns {
		m[b.cfg.Listeners[i].Name] = ln.Addr()
	}
	return m
}
