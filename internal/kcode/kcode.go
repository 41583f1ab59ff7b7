// Package kcode lets a package's sentinel errors name the Kafka error code a client is
// answered with, without that package depending on the Kafka front end or on a Kafka
// library: the WAL, the partition log and the tier declare their sentinels with New, and
// broker/kafka/errors.go, still the one place where errors become codes, reads the code
// back (Walk) instead of importing each of them to name its sentinels.
//
// The constants are the codes of Kafka's protocol (org.apache.kafka.common.protocol.Errors)
// that such sentinels carry; kcode_test.go checks them against franz-go's table.
package kcode

import "errors"

// Kafka error codes carried by sentinels.
const (
	OffsetOutOfRange         int16 = 1
	NotLeaderOrFollower      int16 = 6
	RequestTimedOut          int16 = 7
	OutOfOrderSequenceNumber int16 = 45
	InvalidProducerEpoch     int16 = 47
	InvalidTxnState          int16 = 48
	InvalidRecord            int16 = 87
	KafkaStorageError        int16 = 56
	FencedLeaderEpoch        int16 = 74
	UnknownLeaderEpoch       int16 = 75
)

// Coded is an error that names its Kafka error code.
type Coded interface {
	error
	KafkaCode() int16
}

// sentinel is New's error: a message and a code, compared by identity (errors.Is).
type sentinel struct {
	msg  string
	code int16
}

func (e *sentinel) Error() string    { return e.msg }
func (e *sentinel) KafkaCode() int16 { return e.code }

// New returns a sentinel error with message msg answered with code. Like errors.New,
// each call returns a distinct error.
func New(msg string, code int16) error { return &sentinel{msg: msg, code: code} }

// waitable is NewWaitable's error.
type waitable struct{ sentinel }

func (*waitable) waitsOut() {}

// NewWaitable is New for a condition a long poll may wait out: the request is answered
// with code only if it still holds when the poll's wait ends (a read replica not yet at
// the offset the leader gave the consumer).
func NewWaitable(msg string, code int16) error {
	return &waitable{sentinel{msg: msg, code: code}}
}

// WaitsOut reports whether err (or an error it wraps) was made by NewWaitable.
func WaitsOut(err error) bool {
	var w interface{ waitsOut() }
	return errors.As(err, &w)
}

// Walk calls fn with the code of every Coded error in err's tree, depth first in the
// order errors.Is visits it (an error before what it wraps; of several wrapped, the first
// first), until fn returns false. It reports whether fn stopped it.
func Walk(err error, fn func(code int16) bool) bool {
	for err != nil {
		if c, ok := err.(Coded); ok && !fn(c.KafkaCode()) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if Walk(e, fn) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
