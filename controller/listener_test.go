package controller

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/internal/testutil"
	"github.com/weir-io/weir/metadata"
)

// A registration's zone listeners are stored with the broker; an entry written before
// they existed (no listeners field) registers a broker without any, and a later
// registration replaces them.
func TestFSMRegisterListeners(t *testing.T) {
	f := NewFSM(nil)
	ls := []metadata.Listener{{Zone: "a", Host: "ha", Port: 9093}, {Zone: "b", Host: "hb", Port: 9094}}
	mustApply(t, f, &registerBrokerCmd{ID: 1, Host: "h", Port: 9092, Rack: "a", Listeners: ls})
	if b, _ := f.View().Broker(1); !reflect.DeepEqual(b.Listeners, ls) {
		t.Fatalf("listeners %+v, want %+v", b.Listeners, ls)
	}
	old := append([]byte{byte(cmdRegisterBroker)}, `{"id":1,"host":"h","port":9092,"rack":"a"}`...)
	if res := f.applyData(old); res.Err != nil {
		t.Fatal(res.Err)
	}
	if b, _ := f.View().Broker(1); b.Listeners != nil || b.Epoch != 2 {
		t.Fatalf("after an old registration: %+v", b)
	}
	data, err := encodeCommand(&registerBrokerCmd{ID: 1, Host: "h", Port: 9092, Rack: "a"})
	if err != nil || strings.Contains(string(data), "listeners") {
		t.Fatalf("a command without listeners encodes as before: %s (%v)", data, err)
	}
}

// A broker registers its zone listeners through the controllers; invalid ones are
// refused as a bad request.
func TestRegisterListeners(t *testing.T) {
	tc := newTestCluster(t, 1, nil)
	tc.waitLeader()
	ls := []metadata.Listener{{Zone: "us-east-1a", Host: "10.0.0.1", Port: 9093}, {Zone: "us-east-1b", Host: "10.0.0.1", Port: 9094},
		{Name: "EXTERNAL", Protocol: metadata.ProtocolSSL, Host: "broker1.example.com", Port: 9095}}
	c := tc.client(1, nil)
	b := brokerFor(1, "us-east-1a")
	b.Listeners = ls
	if err := c.RegisterBroker(ctxT(t), b); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the listeners in the view", func() bool {
		got, ok := c.View().Broker(1)
		return ok && reflect.DeepEqual(got.Listeners, ls)
	})

	many := make([]metadata.Listener, metadata.MaxListeners+1)
	for i := range many {
		many[i] = metadata.Listener{Zone: string(rune('a' + i)), Host: "h", Port: 1}
	}
	for name, bad := range map[string][]metadata.Listener{
		"too many":     many,
		"invalid zone": {{Zone: "a b", Host: "h", Port: 1}},
		"empty zone":   {{Zone: "", Host: "h", Port: 1}},
		"zone twice":   {{Zone: "a", Host: "h", Port: 1}, {Zone: "a", Host: "h", Port: 2}},
		"empty host":   {{Zone: "a", Host: "", Port: 1}},
		"long host":    {{Zone: "a", Host: strings.Repeat("h", 256), Port: 1}},
		"port 0":       {{Zone: "a", Host: "h", Port: 0}},
		"port 65536":   {{Zone: "a", Host: "h", Port: 65536}},
		"bad protocol": {{Name: "X", Protocol: "TLS", Host: "h", Port: 1}},
		"name twice":   {{Name: "a", Host: "h", Port: 1}, {Zone: "a", Host: "h", Port: 2}},
		"invalid name": {{Name: "a=b", Host: "h", Port: 1}},
	} {
		bc := tc.client(2, nil)
		b := brokerFor(2, "a")
		b.Listeners = bad
		if err := bc.RegisterBroker(ctxT(t), b); !errors.Is(err, ctlwire.ErrBadRequest) {
			t.Errorf("%s: registered: %v", name, err)
		}
	}
	if _, ok := c.View().Broker(2); ok {
		t.Fatal("a refused registration was stored")
	}
}
