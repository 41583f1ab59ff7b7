package ctlclient

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// PrepareObject implements metadata.ObjectManifest: a new object for this broker's
// current registration. Like every write it returns once the local View has it. A retry
// after an ambiguous failure may leave an extra prepared object of this registration
// behind (nobody commits it; the broker's own garbage collection deletes its prepared
// objects it does not know, or it becomes garbage when the registration ends).
func (c *Client) PrepareObject(ctx context.Context) (metadata.Object, error) {
	req := ctlwire.PrepareObjectRequest{Broker: c.selfID.Load(), Epoch: c.epoch.Load()}
	if req.Broker < 0 || req.Epoch == 0 {
		return metadata.Object{}, fmt.Errorf("%w: %w: this client is not a registered broker", metadata.ErrObjectRejected, metadata.ErrFenced)
	}
	var resp ctlwire.ObjectResponse
	if _, err := c.call(ctx, http.MethodPost, ctlwire.PathPrepareObject, req, &resp); err != nil {
		return metadata.Object{}, err
	}
	if resp.Object.ID == 0 {
		return metadata.Object{}, fmt.Errorf("%w: prepare answered without an object", ctlwire.ErrUnavailable)
	}
	c.waitVersion(ctx, resp.Version)
	return resp.Object, nil
}

// CommitObject implements metadata.ObjectManifest: it commits object id, prepared by
// this broker in its current epoch. If an earlier attempt whose answer was lost already
// committed it, the retry's refusal is recognised and CommitObject succeeds.
func (c *Client) CommitObject(ctx context.Context, id uint64, size int64, ranges []metadata.PartitionRange) error {
	req := ctlwire.CommitObjectRequest{ID: id, Broker: c.selfID.Load(), Epoch: c.epoch.Load(), Size: size, Ranges: ranges}
	var resp ctlwire.ObjectResponse
	info, err := c.call(ctx, http.MethodPost, ctlwire.PathCommitObject, req, &resp)
	if err != nil {
		if info.ambiguous && errors.Is(err, metadata.ErrObjectRejected) && c.refreshConsistent(ctx) == nil && req.AppliedIn(c.View()) {
			return nil // an earlier attempt committed it
		}
		return err
	}
	c.waitVersion(ctx, resp.Version)
	return nil
}

// ReplaceRanges implements metadata.ObjectCompactor: it commits a log cleaner's object in
// place of a partition's ranges. A retry refused after an ambiguous failure succeeds if
// the view shows the replace applied.
func (c *Client) ReplaceRanges(ctx context.Context, id uint64, size int64, rr metadata.RangeReplace) error {
	req := ctlwire.ReplaceRangesRequest{ID: id, Broker: c.selfID.Load(), Epoch: c.epoch.Load(), Size: size, Replace: rr}
	var resp ctlwire.ObjectResponse
	info, err := c.call(ctx, http.MethodPost, ctlwire.PathReplaceRanges, req, &resp)
	if err != nil {
		if info.ambiguous && errors.Is(err, metadata.ErrObjectRejected) && c.refreshConsistent(ctx) == nil && req.AppliedIn(c.View()) {
			return nil
		}
		return err
	}
	c.waitVersion(ctx, resp.Version)
	return nil
}

// deleteObjectsChunk bounds the IDs of one delete request.
const deleteObjectsChunk = 10000

// DeleteObjects implements metadata.ObjectManifest. IDs already deleted are ignored, so
// a retry is harmless. More than deleteObjectsChunk IDs are sent in several commands, in
// order (each one must be acceptable on its own: list a manifest's front objects first).
func (c *Client) DeleteObjects(ctx context.Context, ids []uint64) error {
	for len(ids) > 0 {
		n := min(len(ids), deleteObjectsChunk)
		var resp ctlwire.DeleteObjectsResponse
		if _, err := c.call(ctx, http.MethodPost, ctlwire.PathDeleteObjects, ctlwire.DeleteObjectsRequest{IDs: ids[:n]}, &resp); err != nil {
			return err
		}
		c.waitVersion(ctx, resp.Version)
		ids = ids[n:]
	}
	return nil
}
