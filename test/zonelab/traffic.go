package zonelab

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/weir-io/weir/routing"
)

// TrafficSample is one series of one broker's weir_traffic_bytes_total (routing.Traffic).
type TrafficSample struct {
	Broker                 string
	Local, Peer, Kind, Dir string
	Bytes                  float64
}

// BrokerTraffic is what the brokers themselves counted, since they started.
type BrokerTraffic []TrafficSample

// BrokerTraffic scrapes every broker's weir_traffic_bytes_total (from the control
// namespace: its veths are not zone veths, so scraping adds no cross-zone bytes).
func (l *Lab) BrokerTraffic(ctx context.Context) (BrokerTraffic, error) {
	cl := l.HTTPClient(Control)
	var out BrokerTraffic
	for _, b := range l.Brokers {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.Metrics+"/metrics", nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "text/plain;version=0.0.4")
		resp, err := cl.Do(req)
		if err != nil {
			return nil, fmt.Errorf("zonelab: scraping %s: %w", b.Name, err)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		mfs, err := p.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("zonelab: parsing %s's metrics: %w", b.Name, err)
		}
		mf := mfs[routing.MetricName]
		if mf == nil {
			return nil, fmt.Errorf("zonelab: %s exports no %s", b.Name, routing.MetricName)
		}
		for _, m := range mf.GetMetric() {
			if m.GetCounter() == nil {
				continue
			}
			s := TrafficSample{Broker: b.Name, Bytes: m.GetCounter().GetValue()}
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "local_zone":
					s.Local = lp.GetValue()
				case "peer_zone":
					s.Peer = lp.GetValue()
				case "kind":
					s.Kind = lp.GetValue()
				case "direction":
					s.Dir = lp.GetValue()
				}
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// CrossZone sums, by kind, the bytes the brokers counted between two different known
// zones (peer zone neither the local one nor "unknown"). Inter-broker (kind link) and
// gossip bytes are counted by both ends (routing.Kind.BothEndsCount); only their
// senders' (direction out) are summed, so every byte is counted once.
func (t BrokerTraffic) CrossZone() map[string]float64 {
	out := map[string]float64{}
	for _, s := range t {
		if s.Peer == s.Local || s.Peer == routing.UnknownZone || s.Local == routing.UnknownZone {
			continue
		}
		if k, ok := routing.ParseKind(s.Kind); ok && k.BothEndsCount() && s.Dir != "out" {
			continue
		}
		out[s.Kind] += s.Bytes
	}
	return out
}

// OnZoneVeths is what of CrossZone crosses the lab's zone veths: every kind but
// wal_read (in the lab the WAL root is a directory every namespace shares: storage
// traffic is not network traffic here) and controller (the controllers sit in the
// control namespace, whose veths are not zone veths).
func OnZoneVeths(cross map[string]float64) float64 {
	var sum float64
	for k, v := range cross {
		if k != routing.KindWALRead.String() && k != routing.KindController.String() {
			sum += v
		}
	}
	return sum
}

// FormatCross prints CrossZone's sums, one kind a line.
func FormatCross(cross map[string]float64) string {
	var kinds []string
	for k := range cross {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "  %-15s %14.0f bytes\n", k, cross[k])
	}
	return b.String()
}

// MetricsAddrs are the brokers' /metrics addresses, comma-separated (`weir admin
// traffic --metrics`).
func (l *Lab) MetricsAddrs() string {
	var out []string
	for _, b := range l.Brokers {
		out = append(out, b.Metrics)
	}
	return strings.Join(out, ",")
}
