package kafka

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fillErrors sets every ErrorCode int16 field reachable from v (through structs, slices of
// structs and pointers to structs) to code, giving each slice of structs two elements and
// every []byte some bytes. It returns how many ErrorCode fields it set.
func fillErrors(v reflect.Value, code int16, depth int) int {
	if depth > 8 {
		return 0
	}
	n := 0
	switch v.Kind() {
	case reflect.Pointer:
		if v.Type().Elem().Kind() != reflect.Struct {
			return 0
		}
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return fillErrors(v.Elem(), code, depth+1)
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f, fv := t.Field(i), v.Field(i)
			if !f.IsExported() {
				continue
			}
			if f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16 {
				fv.SetInt(int64(code))
				n++
				continue
			}
			n += fillErrors(fv, code, depth+1)
		}
	case reflect.Slice:
		switch v.Type().Elem().Kind() {
		case reflect.Uint8:
			v.SetBytes([]byte{0, 7, 0, 7, 0, 7}) // would read as codes if the walker looked inside
		case reflect.Struct, reflect.Pointer:
			s := reflect.MakeSlice(v.Type(), 2, 2)
			for i := 0; i < 2; i++ {
				n += fillErrors(s.Index(i), code, depth+1)
			}
			v.Set(s)
		}
	}
	return n
}

// naiveCountErrors is the obvious reflection walk, the reference countErrors must match.
func naiveCountErrors(v reflect.Value, t *errTally) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			naiveCountErrors(v.Elem(), t)
		}
	case reflect.Struct:
		ty := v.Type()
		for i := 0; i < ty.NumField(); i++ {
			f := ty.Field(i)
			if f.Name == "ErrorCode" && f.Type.Kind() == reflect.Int16 {
				if c := int16(v.Field(i).Int()); c != 0 {
					t.add(c)
				}
				continue
			}
			naiveCountErrors(v.Field(i), t)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := 0; i < v.Len(); i++ {
			naiveCountErrors(v.Index(i), t)
		}
	}
}

// Every kmsg response type: countErrors finds exactly the ErrorCode fields there are, at
// every nesting level, and nothing in byte slices.
func TestCountErrorsEveryResponseType(t *testing.T) {
	checked := 0
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		req := kmsg.RequestForKey(key)
		if req == nil {
			continue
		}
		resp := req.ResponseKind()
		var empty errTally
		countErrors(resp, &empty)
		if empty.total() != 0 {
			t.Fatalf("%s: empty response counted %d errors", kmsg.NameForKey(key), empty.total())
		}
		want := fillErrors(reflect.ValueOf(resp), int16(kerr.NotLeaderForPartition.Code), 0)
		var got, ref errTally
		countErrors(resp, &got)
		naiveCountErrors(reflect.ValueOf(resp), &ref)
		if got.total() != want || ref.total() != want {
			t.Fatalf("%s: counted %d errors (reference walk %d), the response has %d", kmsg.NameForKey(key), got.total(), ref.total(), want)
		}
		if want > 0 && (got.n != 1 || got.codes[0] != kerr.NotLeaderForPartition.Code) {
			t.Fatalf("%s: codes %v", kmsg.NameForKey(key), got.codes[:got.n])
		}
		checked++
	}
	if checked < 50 {
		t.Fatalf("only %d response types checked", checked)
	}
}

func TestCountErrorsCodes(t *testing.T) {
	resp := kmsg.NewPtrProduceResponse()
	for ti, codes := range [][]int16{{0, 6, 6, 2}, {3, 0}} {
		rt := kmsg.NewProduceResponseTopic()
		rt.Topic = string(rune('a' + ti))
		for p, c := range codes {
			rp := kmsg.NewProduceResponseTopicPartition()
			rp.Partition, rp.ErrorCode = int32(p), c
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	var tally errTally
	countErrors(resp, &tally)
	got := map[int16]int{}
	tally.each(func(c int16, n int) { got[c] += n })
	if len(got) != 3 || got[6] != 2 || got[2] != 1 || got[3] != 1 {
		t.Fatalf("codes %v", got)
	}

	// More distinct codes than the tally's inline slots.
	var many errTally
	for c := int16(1); c <= 20; c++ {
		many.add(c)
		many.add(c)
	}
	got = map[int16]int{}
	many.each(func(c int16, n int) { got[c] += n })
	if len(got) != 20 || many.total() != 40 || got[20] != 2 {
		t.Fatalf("overflow codes %v", got)
	}

	// Not a pointer to a struct, or nil: nothing, no panic.
	var none errTally
	countErrors(nil, &none)
	countErrors((*kmsg.ProduceResponse)(nil), &none)
	if none.total() != 0 {
		t.Fatal("counted errors in nothing")
	}
}

// Field types the walker must tell apart, beyond what kmsg has today.
func TestErrPlanShapes(t *testing.T) {
	type inner struct {
		ErrorCode int16
		Data      []byte
	}
	type shape struct {
		ErrorCode  int16
		Other      int16                     // not named ErrorCode
		Wide       struct{ ErrorCode int32 } // wrong type
		Nested     inner
		List       []inner
		Ints       []int16
		NoCodes    []struct{ X int16 }
		Deeper     []struct{ Items []inner }
		unexported int16
	}
	s := &shape{ErrorCode: 1, Other: 9, Nested: inner{ErrorCode: 2, Data: []byte{1, 2}},
		List: []inner{{ErrorCode: 3}, {}, {ErrorCode: 3}}, Ints: []int16{5, 5},
		NoCodes: []struct{ X int16 }{{X: 4}}, Deeper: []struct{ Items []inner }{{Items: []inner{{ErrorCode: 7}}}, {}}}
	s.Wide.ErrorCode = 8
	s.unexported = 10
	p := errPlanFor(reflect.TypeOf(*s))
	var tally errTally
	p.walk(reflect.ValueOf(s).UnsafePointer(), &tally)
	got := map[int16]int{}
	tally.each(func(c int16, n int) { got[c] += n })
	want := map[int16]int{1: 1, 2: 1, 3: 2, 7: 1}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("codes %v, want %v", got, want)
	}
	if len(p.slices) != 2 { // List and Deeper; Ints and NoCodes are not visited
		t.Fatalf("plan visits %d slices", len(p.slices))
	}
	if errPlanFor(reflect.TypeOf(struct{ A []byte }{})) != nil {
		t.Fatal("plan for a struct without error codes")
	}
}

func TestErrorName(t *testing.T) {
	for code, want := range map[int16]string{
		6: "NOT_LEADER_FOR_PARTITION", 3: "UNKNOWN_TOPIC_OR_PARTITION", -1: "UNKNOWN_SERVER_ERROR", 32000: "ERROR_CODE_32000",
	} {
		if got := errorName(code); got != want {
			t.Errorf("errorName(%d) = %q, want %q", code, got, want)
		}
	}
}

// fetchResponse1000 is a Fetch response of 10 topics × 100 partitions, 1 KiB of records
// each, with an error in every 50th partition.
func fetchResponse1000() *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	batch := make([]byte, 1024)
	for ti := 0; ti < 10; ti++ {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = "topic-" + string(rune('a'+ti))
		for p := 0; p < 100; p++ {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = int32(p)
			rp.HighWatermark = 1000
			rp.RecordBatches = batch
			if p%50 == 0 {
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
				rp.RecordBatches = nil
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

func TestCountErrorsFetch1000(t *testing.T) {
	var tally errTally
	countErrors(fetchResponse1000(), &tally)
	if tally.n != 1 || tally.codes[0] != kerr.NotLeaderForPartition.Code || tally.counts[0] != 20 {
		t.Fatalf("tally %+v", tally)
	}
	if a := testing.AllocsPerRun(100, func() {
		var t errTally
		countErrors(fetchResponse1000Shared, &t)
	}); a != 0 {
		t.Fatalf("countErrors allocates %.0f times per Fetch response", a)
	}
}

var fetchResponse1000Shared = fetchResponse1000()

// BenchmarkCountErrors: the error walk of a Fetch response with 1,000 partitions, against
// the naive reflection walk it replaces.
func BenchmarkCountErrors(b *testing.B) {
	resp := fetchResponse1000()
	b.Run("plan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var t errTally
			countErrors(resp, &t)
		}
	})
	b.Run("naive-reflect", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var t errTally
			naiveCountErrors(reflect.ValueOf(resp), &t)
		}
	})
}
