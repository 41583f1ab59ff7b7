package kafka

import (
	"context"

	"github.com/weir-io/weir/metadata"
)

// fakeTxnOff is a TxnCoordinator that only turns the transaction keys on (registry
// tests); every call fails.
type fakeTxnOff struct{}

func (fakeTxnOff) Partition(context.Context, string, bool) (*metadata.Topic, int32, error) {
	return nil, 0, metadata.ErrNotController
}
func (fakeTxnOff) InitProducerID(context.Context, string, int32, int64, int16) (int64, int16, error) {
	return -1, -1, metadata.ErrNotController
}
func (fakeTxnOff) AddPartitions(_ context.Context, _ string, _ int64, _ int16, parts []TxnPartition, _ bool) []error {
	return make([]error, len(parts))
}
func (fakeTxnOff) AddOffsets(context.Context, string, int64, int16, string) error { return nil }
func (fakeTxnOff) EndTxn(context.Context, string, int64, int16, bool) error       { return nil }
func (fakeTxnOff) Describe(context.Context, []string) []TxnDescription            { return nil }
func (fakeTxnOff) List(context.Context, []string, []int64) []TxnListing           { return nil }
