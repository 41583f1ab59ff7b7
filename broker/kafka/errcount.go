package kafka

import (
	"reflect"
	"strconv"
	"sync"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kmsg has no generic "errors of this response" accessor, so the error codes a response
// carries are found by walking its struct: every int16 field named ErrorCode, at the top
// level and inside nested structs and slices of structs (topics → partitions → ...).
//
// The walk is planned once per response type with reflection: the plan keeps only the
// paths that can lead to an ErrorCode field (so []byte record batches, strings, tagged
// fields and slices of structs without error codes are never visited) and stores byte
// offsets. Walking a response is then plain pointer arithmetic: a Fetch response with
// 1,000 partitions costs one int16 load per partition and allocates nothing.

// errPlan says where the error codes of one struct type are.
type errPlan struct {
	codes   []uintptr    // offsets of int16 ErrorCode fields
	structs []nestedPlan // struct-valued fields that contain error codes
	slices  []slicePlan  // []struct fields whose elements contain error codes
}

type nestedPlan struct {
	off  uintptr
	plan *errPlan
}

type slicePlan struct {
	off      uintptr
	elemSize uintptr
	plan     *errPlan
}

func (p *errPlan) empty() bool {
	return p == nil || len(p.codes) == 0 && len(p.structs) == 0 && len(p.slices) == 0
}

// errPlans caches reflect.Type (of the struct a response points to) → *errPlan.
var errPlans sync.Map

func errPlanFor(t reflect.Type) *errPlan {
	if p, ok := errPlans.Load(t); ok {
		return p.(*errPlan)
	}
	p := buildErrPlan(t, map[reflect.Type]bool{})
	actual, _ := errPlans.LoadOrStore(t, p)
	return actual.(*errPlan)
}

// buildErrPlan plans struct type t; it returns nil when t holds no error code. visiting
// breaks cycles (kmsg has none, but a recursive type must not hang the broker).
func buildErrPlan(t reflect.Type, visiting map[reflect.Type]bool) *errPlan {
	if t.Kind() != reflect.Struct || visiting[t] {
		return nil
	}
	visiting[t] = true
	defer delete(visiting, t)
	p := &errPlan{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		switch f.Type.Kind() {
		case reflect.Int16:
			if f.Name == "ErrorCode" {
				p.codes = append(p.codes, f.Offset)
			}
		case reflect.Struct:
			if np := buildErrPlan(f.Type, visiting); !np.empty() {
				p.structs = append(p.structs, nestedPlan{off: f.Offset, plan: np})
			}
		case reflect.Slice:
			et := f.Type.Elem()
			if et.Kind() != reflect.Struct { // []byte, []int32, []string, ...: nothing to find
				continue
			}
			if np := buildErrPlan(et, visiting); !np.empty() {
				p.slices = append(p.slices, slicePlan{off: f.Offset, elemSize: et.Size(), plan: np})
			}
		}
	}
	if p.empty() {
		return nil
	}
	return p
}

// errTally counts the non-zero error codes of one response without allocating for the
// usual handful of distinct codes.
type errTally struct {
	n      int
	codes  [8]int16
	counts [8]int
	more   map[int16]int // distinct codes beyond len(codes)
}

func (t *errTally) add(code int16) {
	for i := 0; i < t.n; i++ {
		if t.codes[i] == code {
			t.counts[i]++
			return
		}
	}
	if t.n < len(t.codes) {
		t.codes[t.n], t.counts[t.n] = code, 1
		t.n++
		return
	}
	if t.more == nil {
		t.more = map[int16]int{}
	}
	t.more[code]++
}

// each calls f for every distinct code with its count.
func (t *errTally) each(f func(code int16, n int)) {
	for i := 0; i < t.n; i++ {
		f(t.codes[i], t.counts[i])
	}
	for c, n := range t.more {
		f(c, n)
	}
}

// total is the number of error codes counted.
func (t *errTally) total() int {
	n := 0
	t.each(func(_ int16, c int) { n += c })
	return n
}

// countErrors adds every non-zero ErrorCode of resp to t. resp must be a pointer to a
// struct (every kmsg response is); anything else counts nothing.
func countErrors(resp kmsg.Response, t *errTally) {
	if resp == nil {
		return
	}
	v := reflect.ValueOf(resp)
	if v.Kind() != reflect.Pointer || v.IsNil() {
		return
	}
	p := errPlanFor(v.Type().Elem())
	if p == nil {
		return
	}
	p.walk(v.UnsafePointer(), t)
}

func (p *errPlan) walk(base unsafe.Pointer, t *errTally) {
	for _, off := range p.codes {
		if c := *(*int16)(unsafe.Add(base, off)); c != 0 {
			t.add(c)
		}
	}
	for _, s := range p.structs {
		s.plan.walk(unsafe.Add(base, s.off), t)
	}
	for _, s := range p.slices {
		// Every slice header has the same layout (data, len, cap) whatever its element
		// type, so it can be read as a []byte whose len is the element count.
		hdr := *(*[]byte)(unsafe.Add(base, s.off))
		n := len(hdr)
		if n == 0 {
			continue
		}
		data := unsafe.Pointer(unsafe.SliceData(hdr))
		for i := 0; i < n; i++ {
			s.plan.walk(unsafe.Add(data, uintptr(i)*s.elemSize), t)
		}
	}
}

// errorName is the label value of an error code: Kafka's name for it (e.g.
// NOT_LEADER_OR_FOLLOWER), or the number for a code kerr does not know.
func errorName(code int16) string {
	if e := kerr.TypedErrorForCode(code); e != nil && e.Code == code {
		return e.Message
	}
	return "ERROR_CODE_" + strconv.Itoa(int(code))
}
