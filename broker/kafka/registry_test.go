package kafka

import (
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/weir-io/weir/broker/group"
	"github.com/weir-io/weir/internal/kafkatest"
)

// ApiVersions advertises exactly the registry's keys this server serves (the
// transaction keys only with a coordinator), and the group keys are exactly the group
// coordinator's.
func TestRegistryIsWhatApiVersionsAdvertises(t *testing.T) {
	public, always := 0, 0
	for _, a := range apis {
		if !a.internal {
			public++
			if a.on == nil {
				always++
			}
		}
	}
	if n := len(apiVersionsResponse(&Server{txn: fakeTxnOff{}, groups: group.New(group.DefaultConfig(), nil, nil), share: &Share{}}, 4).ApiKeys); n != public {
		t.Fatalf("with transactions, consumer groups (the default) and share groups on, ApiVersions lists %d keys, the registry has %d public ones", n, public)
	}
	off := group.DefaultConfig()
	off.ConsumerProtocol = false
	if n := len(apiVersionsResponse(&Server{txn: fakeTxnOff{}, groups: group.New(off, nil, nil)}, 4).ApiKeys); n != public-2-7 {
		t.Fatalf("with consumer and share groups off, ApiVersions lists %d keys, want %d (without keys 68, 69, 76-79, 90-92)", n, public-2-7)
	}
	resp := apiVersionsResponse(nil, 4)
	if len(resp.ApiKeys) != always || always >= public {
		t.Fatalf("without a coordinator, ApiVersions lists %d keys, want the %d served whatever the configuration (of %d)", len(resp.ApiKeys), always, public)
	}
	for _, ak := range resp.ApiKeys {
		if ak.ApiKey == InternalKey {
			t.Fatal("the internal key is advertised")
		}
	}
	for _, ak := range resp.ApiKeys {
		a, ok := apis[ak.ApiKey]
		if !ok || a.handle == nil {
			t.Fatalf("key %d (%s) advertised without a handler", ak.ApiKey, kmsg.NameForKey(ak.ApiKey))
		}
		if a.min != ak.MinVersion || a.max != ak.MaxVersion {
			t.Fatalf("key %d: advertised %d-%d, registered %d-%d", ak.ApiKey, ak.MinVersion, ak.MaxVersion, a.min, a.max)
		}
		if kmsg.RequestForKey(ak.ApiKey) == nil {
			t.Fatalf("key %d has no kmsg request type", ak.ApiKey)
		}
	}
	for key, max := range group.ConsumerMaxVersions() {
		if a := apis[key]; a.max != max || a.on == nil {
			t.Fatalf("consumer group key %d: registered up to v%d (switchable %v), the coordinator serves up to v%d", key, a.max, a.on != nil, max)
		}
	}
	for key, max := range group.MaxVersions() {
		if a := apis[key]; a.max != max {
			t.Fatalf("group key %d: registered up to v%d, the coordinator serves up to v%d", key, a.max, max)
		}
	}
}

// Every advertised key and version, sent with default fields over a real connection, is
// answered by its own handler with a response of its own key: nothing advertised falls
// through to another handler or closes the connection.
func TestEveryAdvertisedKeyIsAnswered(t *testing.T) {
	s, _ := startServer(t)
	c := dialRaw(t, s)
	corr := int32(0)
	for _, ak := range apiVersionsResponse(nil, 4).ApiKeys {
		for _, v := range []int16{ak.MinVersion, ak.MaxVersion} {
			req := kmsg.RequestForKey(ak.ApiKey)
			req.SetVersion(v)
			if p, ok := req.(*kmsg.ProduceRequest); ok {
				p.Acks = 1 // acks=0 is answered by silence
			}
			if f, ok := req.(*kmsg.FetchRequest); ok {
				f.MaxWaitMillis = 0
			}
			corr++
			c.send(corr, req)
			got, body, err := c.recv(10 * time.Second)
			if err != nil {
				t.Fatalf("%s v%d: no answer: %v", kmsg.NameForKey(ak.ApiKey), v, err)
			}
			if got != corr {
				t.Fatalf("%s v%d: answer for correlation %d, want %d", kmsg.NameForKey(ak.ApiKey), v, got, corr)
			}
			if _, err := decode(req, body); err != nil {
				t.Fatalf("%s v%d: the answer is not a %s response: %v", kmsg.NameForKey(ak.ApiKey), v, kmsg.NameForKey(ak.ApiKey), err)
			}
		}
	}
}

// A key that is not registered never reaches a handler: the connection gets
// UNSUPPORTED_VERSION and is closed.
func TestUnregisteredKeyIsRefused(t *testing.T) {
	s, _ := startServer(t)
	for _, key := range []int16{24 /* AddPartitionsToTxn: transactions are off */, 57, 1000} {
		if a, ok := apis[key]; ok && a.served(s) {
			t.Fatalf("key %d is served; pick another", key)
		}
		c := dialRaw(t, s)
		frame := binary.BigEndian.AppendUint32(nil, 0)
		frame = binary.BigEndian.AppendUint16(frame, uint16(key))
		frame = binary.BigEndian.AppendUint16(frame, 0)
		frame = binary.BigEndian.AppendUint32(frame, 9)
		frame = binary.BigEndian.AppendUint16(frame, 0xffff)
		frame = append(frame, 0, 0, 0, 0)
		binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
		if _, err := c.nc.Write(frame); err != nil {
			t.Fatal(err)
		}
		corr, body, err := c.recv(10 * time.Second)
		if err != nil || corr != 9 || len(body) < 2 || int16(binary.BigEndian.Uint16(body)) != kerr.UnsupportedVersion.Code {
			t.Fatalf("key %d: answer corr %d body %x err %v, want UNSUPPORTED_VERSION", key, corr, body, err)
		}
		if _, _, err := c.recv(10 * time.Second); !errors.Is(err, io.EOF) {
			t.Fatalf("key %d: connection still open after an unsupported request: %v", key, err)
		}
	}
}

// A fetch that blocks (a cold read from object storage, say) runs off the reader
// goroutine: a produce pipelined behind it on the same connection reaches the log while
// the fetch still waits, and the answers still go out in request order.
func TestBlockingFetchDoesNotStallProduce(t *testing.T) {
	s, be := startServer(t)
	inRead := make(chan struct{}, 1)
	release := make(chan struct{})
	appended := make(chan struct{}, 1)
	be.onRead = func() {
		select {
		case inRead <- struct{}{}:
		default:
		}
		<-release
	}
	be.onApp = func() { appended <- struct{}{} }
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	c := dialRaw(t, s)
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(11)
	fetch.MaxWaitMillis, fetch.MinBytes, fetch.MaxBytes = 0, 1, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "t"
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes = 0, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	c.send(1, fetch)
	select {
	case <-inRead:
	case <-time.After(10 * time.Second):
		t.Fatal("the fetch never read its partition")
	}

	prod := kmsg.NewPtrProduceRequest()
	prod.SetVersion(9)
	prod.Acks = -1
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "t"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = 1
	pp.Records = kafkatest.Batch(-1, -1, -1, []byte("v"))
	pt.Partitions = append(pt.Partitions, pp)
	prod.Topics = append(prod.Topics, pt)
	c.send(2, prod)
	select {
	case <-appended:
	case <-time.After(10 * time.Second):
		t.Fatal("the produce did not reach the log while a fetch before it was blocked")
	}
	// The produce is done, but its answer must wait for the fetch's: nothing may arrive
	// while the fetch is blocked (the fetch cannot answer before release).
	if corr, _, err := c.recv(200 * time.Millisecond); err == nil {
		t.Fatalf("answer %d arrived before the blocked fetch's", corr)
	}
	close(release)
	for _, want := range []int32{1, 2} {
		corr, body, err := c.recv(10 * time.Second)
		if err != nil || corr != want {
			t.Fatalf("answer %d (err %v), want %d: responses out of request order", corr, err, want)
		}
		var req kmsg.Request = fetch
		if want == 2 {
			req = prod
		}
		if _, err := decode(req, body); err != nil {
			t.Fatalf("answer %d: %v", want, err)
		}
	}
}

// A partition that fails in a Fetch answer carries an empty record set, never a null
// one: librdkafka cannot parse a null set ("invalid MessageSetSize -1"), drops the whole
// answer without seeing the error code, and fetches from the same broker for ever.
func TestFetchErrorRecordsAreEmptyNotNull(t *testing.T) {
	s, _ := startServer(t)
	c := dialRaw(t, s)
	for _, v := range []int16{4, 11, 12} {
		req := kmsg.NewPtrFetchRequest()
		req.SetVersion(v)
		req.ReplicaID = -1
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = "no-such-topic"
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		req.Topics = append(req.Topics, ft)
		c.send(int32(v), req)
		_, body, err := c.recv(10 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := decode(req, body)
		if err != nil {
			t.Fatal(err)
		}
		p := resp.(*kmsg.FetchResponse).Topics[0].Partitions[0]
		if p.ErrorCode == 0 {
			t.Fatalf("v%d: no error for an unknown topic", v)
		}
		if p.RecordBatches == nil {
			t.Fatalf("v%d: the failed partition's record set is null", v)
		}
	}
}
