package metadata

import (
	"errors"
	"reflect"
	"testing"
)

// replaceRules is the state of a cleaner's commit: topic "t" (partition 0 led by broker 1
// in leader epoch 3, ranges of objects 1, 2, 3 over 0..9, 10..19, 20..29 and a producer
// snapshot; partition 1 led by broker 2), object 10 prepared by broker 1 in epoch 1 and
// object 11 by broker 2 in epoch 1. Broker 1 epoch 2 is not current (fenced).
func replaceRules() *ObjectRules {
	snap := &ProducerSnapshot{Offset: 30, Producers: []ProducerState{{ID: 7}}}
	t := &Topic{Name: "t", ID: TopicID{1}, Partitions: []Partition{
		{Index: 0, Leader: 1, LeaderEpoch: 3, Producers: snap, Objects: []ObjectRange{
			{Object: 1, FirstOffset: 0, LastOffset: 9, Bytes: 100},
			{Object: 2, FirstOffset: 10, LastOffset: 19, Bytes: 100},
			{Object: 3, FirstOffset: 20, LastOffset: 29, Bytes: 100},
		}},
		{Index: 1, Leader: 2, LeaderEpoch: 1, Objects: []ObjectRange{{Object: 3, FirstOffset: 0, LastOffset: 4}}},
	}}
	return &ObjectRules{
		Objects: map[uint64]Object{
			1: {ID: 1, State: ObjectCommitted, Broker: 1, Epoch: 1}, 2: {ID: 2, State: ObjectCommitted, Broker: 1, Epoch: 1},
			3:  {ID: 3, State: ObjectCommitted, Broker: 1, Epoch: 1},
			10: {ID: 10, Key: ObjectKey(10), State: ObjectPrepared, Broker: 1, Epoch: 1},
			11: {ID: 11, Key: ObjectKey(11), State: ObjectPrepared, Broker: 2, Epoch: 1},
			12: {ID: 12, Key: ObjectKey(12), State: ObjectPrepared, Broker: 1, Epoch: 2},
		},
		NextID:    13,
		TopicByID: func(id TopicID) *Topic { return map[TopicID]*Topic{t.ID: t}[id] },
		Current: func(broker int32, epoch int64) error {
			if epoch != 1 {
				return errors.Join(ErrObjectRejected, ErrFenced)
			}
			return nil
		},
	}
}

// replaceOf names objects ids of t/partition, replaced by a range first..last.
func replaceOf(partition int32, epoch int32, first, last int64, ids ...uint64) RangeReplace {
	return RangeReplace{Range: PartitionRange{Topic: TopicID{1}, Partition: partition, FirstOffset: first, LastOffset: last, Bytes: 50}, Replaces: ids, LeaderEpoch: epoch}
}

// TestReplaceRefusals: every way a cleaner's commit can be out of date or malformed is
// refused with ErrObjectRejected (ErrFenced when leadership or the broker moved on,
// ErrUnknownTopic for a topic gone), and a good one replaces exactly the named ranges.
func TestReplaceRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		id     uint64
		broker int32
		epoch  int64
		rr     RangeReplace
		want   []error
	}{
		{"unknown object", 99, 1, 1, replaceOf(0, 3, 0, 19, 1, 2), nil},
		{"object already committed (a retry)", 1, 1, 1, replaceOf(0, 3, 0, 19, 1, 2), nil},
		{"object prepared by another broker", 11, 1, 1, replaceOf(0, 3, 0, 19, 1, 2), nil},
		{"broker's epoch fenced", 12, 1, 2, replaceOf(0, 3, 0, 19, 1, 2), []error{ErrFenced}},
		{"nothing replaced", 10, 1, 1, replaceOf(0, 3, 0, 19), nil},
		{"not the partition's leader", 11, 2, 1, replaceOf(0, 3, 0, 19, 1, 2), []error{ErrFenced}},
		{"an older leader epoch", 10, 1, 1, replaceOf(0, 2, 0, 19, 1, 2), []error{ErrFenced}},
		{"a newer leader epoch", 10, 1, 1, replaceOf(0, 4, 0, 19, 1, 2), []error{ErrFenced}},
		{"ranges not consecutive", 10, 1, 1, replaceOf(0, 3, 0, 29, 1, 3), nil},
		{"ranges out of order", 10, 1, 1, replaceOf(0, 3, 0, 19, 2, 1), nil},
		{"past the manifest's end", 10, 1, 1, replaceOf(0, 3, 20, 39, 3, 4), nil},
		{"range starts inside the first", 10, 1, 1, replaceOf(0, 3, 1, 19, 1, 2), nil},
		{"range ends short of the last", 10, 1, 1, replaceOf(0, 3, 0, 18, 1, 2), nil},
		{"range ends past the last", 10, 1, 1, replaceOf(0, 3, 0, 20, 1, 2), nil},
		{"unknown topic", 10, 1, 1, RangeReplace{Range: PartitionRange{Topic: TopicID{9}, LastOffset: 19}, Replaces: []uint64{1, 2}, LeaderEpoch: 3}, []error{ErrUnknownTopic}},
		{"unknown partition", 10, 1, 1, replaceOf(5, 3, 0, 19, 1, 2), []error{ErrUnknownTopic}},
		{"carries a producer snapshot", 10, 1, 1, func() RangeReplace {
			rr := replaceOf(0, 3, 0, 19, 1, 2)
			rr.Range.Producers = &ProducerSnapshot{Offset: 20}
			return rr
		}(), nil},
		{"aborted transaction outside the range", 10, 1, 1, func() RangeReplace {
			rr := replaceOf(0, 3, 0, 19, 1, 2)
			rr.Range.Aborted = []AbortedTxn{{ProducerID: 7, First: 5, Last: 25}}
			return rr
		}(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := replaceRules()
			before := slicesCopy(r.TopicByID(TopicID{1}).Partitions[0].Objects)
			_, _, err := r.Replace(tc.id, tc.broker, tc.epoch, 50, tc.rr)
			for _, w := range append([]error{ErrObjectRejected}, tc.want...) {
				if !errors.Is(err, w) {
					t.Fatalf("%v, want %v", err, w)
				}
			}
			if tc.want == nil && errors.Is(err, ErrFenced) {
				t.Fatalf("%v: fenced, want a plain refusal", err)
			}
			if after := r.TopicByID(TopicID{1}).Partitions[0].Objects; !reflect.DeepEqual(after, before) {
				t.Fatalf("refused but the manifest changed: %+v", after)
			}
		})
	}

	// Retention dropped the first range (object 1) while the cleaner worked on it.
	r := replaceRules()
	p := &r.TopicByID(TopicID{1}).Partitions[0]
	p.LogStartOffset, p.Objects = 10, p.Objects[1:]
	if _, _, err := r.Replace(10, 1, 1, 50, replaceOf(0, 3, 0, 19, 1, 2)); !errors.Is(err, ErrObjectRejected) || errors.Is(err, ErrFenced) {
		t.Fatalf("front already trimmed: %v, want a refusal", err)
	}

	t.Run("accepted", func(t *testing.T) {
		r := replaceRules()
		p := r.TopicByID(TopicID{1}).Partitions[0]
		rr := replaceOf(0, 3, 10, 29, 2, 3)
		rr.Range.MaxTimestamp = 1234
		rr.Range.Aborted = []AbortedTxn{{ProducerID: 7, First: 12, Last: 15}}
		o, ch, err := r.Replace(10, 1, 1, 77, rr)
		if err != nil {
			t.Fatal(err)
		}
		if o.State != ObjectCommitted || o.Size != 77 || o.ID != 10 || o.Broker != 1 {
			t.Fatalf("object %+v", o)
		}
		want := []ObjectRange{p.Objects[0], {Object: 10, FirstOffset: 10, LastOffset: 29, MaxTimestamp: 1234, Bytes: 50, Compacted: true,
			Aborted: []AbortedTxn{{ProducerID: 7, First: 12, Last: 15}}}}
		if !reflect.DeepEqual(ch.Objects, want) || ch.PartitionRef != (PartitionRef{TopicID{1}, 0}) {
			t.Fatalf("manifest %+v, want %+v", ch.Objects, want)
		}
		if ch.Producers != p.Producers {
			t.Fatalf("producer snapshot %+v, want the partition's own (the manifest's end did not move)", ch.Producers)
		}
		if len(p.Objects) != 3 || p.Objects[1].Object != 2 {
			t.Fatalf("the replace wrote into the old manifest: %+v", p.Objects)
		}
	})
}

func slicesCopy(rs []ObjectRange) []ObjectRange { return append([]ObjectRange(nil), rs...) }
