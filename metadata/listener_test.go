package metadata

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// A broker's endpoint for a zone is its listener of that zone when it has one, else
// its main address; the main listener ("") always gets the main address.
func TestBrokerEndpoint(t *testing.T) {
	b := Broker{ID: 1, Host: "main", Port: 9092, Listeners: []Listener{
		{Zone: "a", Host: "la", Port: 9093},
		{Zone: "b", Host: "lb", Port: 9094},
		{Name: "SSL", Protocol: ProtocolSSL, Host: "ls", Port: 9095},
		{Name: "c", Zone: "c", Protocol: ProtocolSSL, Host: "lc", Port: 9096},
	}}
	for _, tc := range []struct {
		zone string
		host string
		port int32
	}{
		{"", "main", 9092},
		{"a", "la", 9093},
		{"b", "lb", 9094},
		{"c", "lc", 9096},
		{"SSL", "ls", 9095},
		{"d", "main", 9092},
		{"A", "main", 9092}, // zones compare exactly
	} {
		if h, p := b.Endpoint(tc.zone); h != tc.host || p != tc.port {
			t.Errorf("Endpoint(%q) = %s:%d, want %s:%d", tc.zone, h, p, tc.host, tc.port)
		}
	}
	if h, p := (Broker{Host: "h", Port: 1}).Endpoint("a"); h != "h" || p != 1 {
		t.Errorf("no listeners: Endpoint(a) = %s:%d", h, p)
	}
}

// Listeners are additive JSON: a broker without them encodes as before, an older
// encoding decodes with none, and they round-trip.
func TestBrokerListenersJSON(t *testing.T) {
	old := `{"id":1,"host":"h","port":9092,"rack":"a","epoch":3,"state":"active"}`
	var b Broker
	if err := json.Unmarshal([]byte(old), &b); err != nil || b.Listeners != nil {
		t.Fatalf("old encoding: %+v, %v", b, err)
	}
	out, err := json.Marshal(b)
	if err != nil || string(out) != old {
		t.Fatalf("re-encoded %s, want %s (%v)", out, old, err)
	}
	b.Listeners = []Listener{{Zone: "b", Host: "hb", Port: 9093}}
	out, err = json.Marshal(b)
	if err != nil || !strings.Contains(string(out), `"listeners":[{"zone":"b","host":"hb","port":9093}]`) {
		t.Fatalf("encoded %s (%v)", out, err)
	}
	var back Broker
	if err := json.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back, b) {
		t.Fatalf("round trip: %+v, want %+v (%v)", back, b, err)
	}
}
