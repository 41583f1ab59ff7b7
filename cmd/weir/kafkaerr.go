package main

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// itemErr is the refusal of one item of a command (a topic, a partition, a config
// resource), as the table and --json print it: the Kafka error name the broker answered,
// its message, and what the operator can do about it. The zero value is success.
type itemErr struct {
	Error   string `json:"error,omitempty"`         // Kafka error name (TOPIC_ALREADY_EXISTS), or the client's error
	Message string `json:"error_message,omitempty"` // the broker's message, else the error's description
	Hint    string `json:"hint,omitempty"`          // what to do
	err     error  // kept for the command's returned error (errors.Is works on it)
}

// newItemErr describes err (nil: success) about subject (a topic name, "broker 2"): msg
// is the broker's error message, if any; hint replaces the generic hint when not "".
func newItemErr(err error, msg, subject, hint string) itemErr {
	if err == nil {
		return itemErr{}
	}
	e := itemErr{Error: err.Error(), Message: msg, err: err}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		e.Error = ke.Message
		if e.Message == "" {
			e.Message = ke.Description
		}
	}
	e.Hint = hint
	if e.Hint == "" {
		e.Hint = kafkaHint(err, subject)
	}
	return e
}

func (e itemErr) failed() bool { return e.err != nil }

// cell is the table's ERROR column: text, or "-".
func (e itemErr) cell() string { return dash(e.text()) }

// text is the table's form: "TOPIC_ALREADY_EXISTS: message (hint)". (Not String: the
// rows that embed an itemErr would print as their error alone.)
func (e itemErr) text() string {
	s := e.Error
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

// kafkaHint says what to do about a broker's refusal of subject; "" when the error's
// message says it all.
func kafkaHint(err error, subject string) string {
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		return fmt.Sprintf("it exists: weir topic describe %s shows it; delete it first to re-create it", subject)
	case errors.Is(err, kerr.UnknownTopicOrPartition), errors.Is(err, kerr.UnknownTopicID):
		return fmt.Sprintf("no topic %s: weir topic list shows the topics", subject)
	case errors.Is(err, kerr.PolicyViolation):
		return "the cluster's policy refused the request; the message says which rule"
	case errors.Is(err, kerr.InvalidConfig):
		return "a config key or value is not accepted: weir config describe --topic T --all lists the keys and their defaults"
	case errors.Is(err, kerr.InvalidPartitions):
		return "a topic's partition count is at least 1 and can only grow"
	case errors.Is(err, kerr.InvalidReplicationFactor):
		return "give a positive --replication-factor, or leave it out for the broker's default"
	case errors.Is(err, kerr.InvalidTopicException):
		return "a topic name is 1 to 249 of the characters a-z A-Z 0-9 . _ -, and not . or .."
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.ClusterAuthorizationFailed):
		return "the principal you connect as (--sasl-user, or the --tls-cert's CN) lacks an ACL for this: weir admin acl add grants it"
	case errors.Is(err, kerr.TopicDeletionDisabled):
		return "the brokers refuse topic deletion"
	case errors.Is(err, kerr.ThrottlingQuotaExceeded):
		return "the cluster throttles topic changes: retry in a moment"
	case kerr.IsRetriable(err):
		return "the cluster is changing (a leader or controller moving): retry in a moment"
	}
	return ""
}

// failures counts a command's failed items (printed with their errors) for the
// command's own error, which wraps the first one's: errors.Is finds the Kafka error.
type failures struct {
	n, total int
	first    string
	err1     itemErr
}

// add counts one item, failed or not.
func (f *failures) add(name string, e itemErr) {
	f.total++
	if !e.failed() {
		return
	}
	if f.n == 0 {
		f.first, f.err1 = name, e
	}
	f.n++
}

// err is nil when nothing failed. One item: its whole error (the broker's message and
// the hint); more: how many failed and the first one's Kafka error name.
func (f *failures) err(cmd, noun string) error {
	switch {
	case f.n == 0:
		return nil
	case f.total == 1:
		return fmt.Errorf("%s: %s: %w", cmd, f.first, shownErr{f.err1.text(), f.err1.err})
	}
	return fmt.Errorf("%s: %d of %d %s failed (the first: %s: %w)", cmd, f.n, f.total, noun, f.first, shownErr{f.err1.Error, f.err1.err})
}

// shownErr prints text and wraps err (the Kafka error, for errors.Is).
type shownErr struct {
	text string
	err  error
}

func (e shownErr) Error() string { return e.text }
func (e shownErr) Unwrap() error { return e.err }
