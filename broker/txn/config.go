package txn

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/weir-io/weir/internal/clock"
)

// Config configures a Coordinator. Zero fields are not replaced by defaults: start from
// DefaultConfig.
type Config struct {
	// Partitions is the number of partitions of __transaction_state
	// (transaction.state.log.num.partitions): a transactional ID's coordinator is the
	// leader of partition PartitionFor(id, Partitions). It must never change once
	// transactional IDs are placed. Default 8 (Kafka's is 50; Weir's partitions are
	// cheap to load but each is a coordinator to fail over).
	Partitions int
	// IDExpiration is transactional.id.expiration.ms: a transactional ID with no
	// transaction open whose state has not changed for this long is forgotten (a
	// tombstone is written; its producer ID is not reused). Default 7 days.
	IDExpiration time.Duration
	// MaxTimeout is transaction.max.timeout.ms: InitProducerId asking for a longer
	// transaction timeout gets INVALID_TRANSACTION_TIMEOUT. Default 15 minutes.
	MaxTimeout time.Duration
	// AbortCheckInterval is transaction.abort.timed.out.transaction.cleanup.interval.ms:
	// how often open transactions are checked against their timeout (those past it are
	// aborted with a bumped epoch). Default 10 s.
	AbortCheckInterval time.Duration
	// ExpirationCheckInterval is
	// transaction.remove.expired.transaction.cleanup.interval.ms: how often idle
	// transactional IDs are checked against IDExpiration. Default 1 hour.
	ExpirationCheckInterval time.Duration
	// RetryBackoff and RetryBackoffMax bound the wait between two attempts to write a
	// transaction's markers, or its Complete record, that failed: it doubles from
	// RetryBackoff up to RetryBackoffMax. Defaults 100 ms and 5 s.
	RetryBackoff, RetryBackoffMax time.Duration
	// MarkerTimeout bounds one MarkerWriter call (request.timeout.ms). Default 30 s.
	MarkerTimeout time.Duration
	// Clock is the time source for timestamps and timers. Default: real time.
	Clock Clock
	// Log receives what the coordinator does on its own (timeouts, markers retried,
	// expirations). Nil: discarded.
	Log *slog.Logger
}

// DefaultConfig returns Kafka's defaults (Partitions excepted, see there).
func DefaultConfig() Config {
	return Config{
		Partitions:              8,
		IDExpiration:            7 * 24 * time.Hour,
		MaxTimeout:              15 * time.Minute,
		AbortCheckInterval:      10 * time.Second,
		ExpirationCheckInterval: time.Hour,
		RetryBackoff:            100 * time.Millisecond,
		RetryBackoffMax:         5 * time.Second,
		MarkerTimeout:           30 * time.Second,
		Clock:                   RealClock(),
	}
}

// Validate reports whether the configuration is usable.
func (c Config) Validate() error {
	var errs []error
	positive := func(name string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("txn: %s must be > 0, got %v", name, d))
		}
	}
	if c.Partitions <= 0 || c.Partitions > math.MaxInt32 {
		errs = append(errs, fmt.Errorf("txn: Partitions must be in [1, %d], got %d", math.MaxInt32, c.Partitions))
	}
	positive("IDExpiration", c.IDExpiration)
	positive("MaxTimeout", c.MaxTimeout)
	if c.MaxTimeout > math.MaxInt32*time.Millisecond {
		errs = append(errs, fmt.Errorf("txn: MaxTimeout must fit an int32 of milliseconds, got %v", c.MaxTimeout))
	}
	positive("AbortCheckInterval", c.AbortCheckInterval)
	positive("ExpirationCheckInterval", c.ExpirationCheckInterval)
	positive("RetryBackoff", c.RetryBackoff)
	if c.RetryBackoffMax < c.RetryBackoff {
		errs = append(errs, fmt.Errorf("txn: RetryBackoffMax (%v) must be >= RetryBackoff (%v)", c.RetryBackoffMax, c.RetryBackoff))
	}
	positive("MarkerTimeout", c.MarkerTimeout)
	if c.Clock == nil {
		errs = append(errs, errors.New("txn: Clock must not be nil"))
	}
	return errors.Join(errs...)
}

// Clock and Timer are internal/clock's: the one clock both coordinators schedule by.
type (
	Clock = clock.Clock
	Timer = clock.Timer
)

// RealClock returns the time package's clock.
func RealClock() Clock { return clock.Real() }
