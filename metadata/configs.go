package metadata

import (
	"fmt"
	"strconv"
	"strings"
)

// ConfigDef describes one topic config key Weir knows.
type ConfigDef struct {
	Default string
	// Validate checks a value; nil accepts anything.
	Validate func(string) error
	// Doc is returned in DescribeConfigs v3+.
	Doc string
}

// DefaultMaxMessageBytes is Kafka's default max.message.bytes (1 MiB + record batch overhead).
const DefaultMaxMessageBytes = 1048588

// TopicConfigs is the catalogue of topic configs. Keys that Weir stores but does not act on
// (e.g. segment.bytes) are accepted so existing tooling can create its topics; the
// docs say which ones are enforced.
var TopicConfigs = map[string]ConfigDef{
	"cleanup.policy":                      {"delete", oneOf("delete", "compact", "compact,delete", "delete,compact"), "Retention policy: delete (retention.ms/bytes), compact (the log cleaner keeps each key's latest record; docs/DESIGN.md, Compaction), or both."},
	"compression.type":                    {"producer", oneOf("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"), "Weir stores batches as the producer sent them."},
	"delete.retention.ms":                 {"86400000", intRange(0, 1<<62), "How long the cleaner keeps a tombstone or transaction marker after it first cleaned it."},
	"file.delete.delay.ms":                {"60000", intRange(0, 1<<62), ""},
	"flush.messages":                      {"9223372036854775807", intRange(1, 1<<63-1), "Ignored: every acked batch is fdatasync'ed."},
	"flush.ms":                            {"9223372036854775807", intRange(0, 1<<63-1), "Ignored: every acked batch is fdatasync'ed."},
	"index.interval.bytes":                {"4096", intRange(0, 1<<31-1), ""},
	"max.compaction.lag.ms":               {"9223372036854775807", intRange(1, 1<<63-1), "A dirty object range older than this is cleaned whatever the dirty ratio."},
	"max.message.bytes":                   {strconv.Itoa(DefaultMaxMessageBytes), intRange(0, 1<<31-1), "Largest record batch accepted (MESSAGE_TOO_LARGE above)."},
	"message.timestamp.type":              {"CreateTime", oneOf("CreateTime", "LogAppendTime"), ""},
	"message.timestamp.difference.max.ms": {"9223372036854775807", intRange(0, 1<<63-1), ""},
	"min.cleanable.dirty.ratio":           {"0.5", nil, "The cleaner runs when dirty bytes are this share of the partition's cleanable objects."},
	"min.compaction.lag.ms":               {"0", intRange(0, 1<<62), "Object ranges with a batch newer than this are not cleaned yet."},
	"min.insync.replicas":                 {"1", intRange(1, 1<<31-1), "Ignored: the shared WAL is the single durable copy."},
	"preallocate":                         {"false", oneOf("true", "false"), ""},
	"retention.bytes":                     {"-1", intRange(-1, 1<<63-1), ""},
	"retention.ms":                        {"604800000", intRange(-1, 1<<63-1), ""},
	"segment.bytes":                       {"1073741824", intRange(14, 1<<31-1), ""},
	"segment.index.bytes":                 {"10485760", intRange(4, 1<<31-1), ""},
	"segment.jitter.ms":                   {"0", intRange(0, 1<<62), ""},
	"segment.ms":                          {"604800000", intRange(1, 1<<62), ""},
	"unclean.leader.election.enable":      {"false", oneOf("true", "false"), ""},
	"message.downconversion.enable":       {"true", oneOf("true", "false"), ""},
}

// ValidateTopicConfig checks a key and value against the catalogue.
func ValidateTopicConfig(key, value string) error {
	def, ok := TopicConfigs[key]
	if !ok {
		return fmt.Errorf("%w: unknown topic config %q", ErrInvalidConfig, key)
	}
	if def.Validate != nil {
		if err := def.Validate(value); err != nil {
			return fmt.Errorf("%w: %s=%q: %v", ErrInvalidConfig, key, value, err)
		}
	}
	return nil
}

func oneOf(vals ...string) func(string) error {
	return func(v string) error {
		for _, x := range vals {
			if strings.EqualFold(v, x) {
				return nil
			}
		}
		return fmt.Errorf("must be one of %s", strings.Join(vals, ", "))
	}
}

func intRange(lo, hi int64) func(string) error {
	return func(v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("not an integer")
		}
		if n < lo || n > hi {
			return fmt.Errorf("must be in [%d, %d]", lo, hi)
		}
		return nil
	}
}

// OffsetsTopic is the internal topic of the groups' committed offsets, Kafka's name: the
// broker stores and serves it, the tier never applies retention to it, and the front end
// refuses clients' writes to it.
const OffsetsTopic = "__consumer_offsets"

// ValidTopicName follows Kafka's rules: 1-249 chars of [a-zA-Z0-9._-], not "." or "..".
func ValidTopicName(name string) error {
	if name == "" || name == "." || name == ".." || len(name) > 249 {
		return fmt.Errorf("%w: %q", ErrInvalidTopic, name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("%w: %q has illegal character %q", ErrInvalidTopic, name, c)
		}
	}
	return nil
}
