package controller

import (
	"fmt"
	"net/http"

	"github.com/weir-io/weir/controller/ctlwire"
	"github.com/weir-io/weir/metadata"
)

// Object manifest writes: the commands validate everything against the state when
// applied (cmd_objects.go), so these need no admin lock.

func (c *Controller) handlePrepareObject(r *http.Request, body []byte) (any, error) {
	var req ctlwire.PrepareObjectRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	res, err := c.propose(&prepareObjectCmd{Broker: req.Broker, Epoch: req.Epoch})
	if err != nil {
		return nil, err
	}
	o, ok := res.Value.(metadata.Object)
	if !ok {
		return nil, fmt.Errorf("%w: prepare answered %T", ctlwire.ErrInternal, res.Value)
	}
	return ctlwire.ObjectResponse{Object: o, Version: res.Version}, nil
}

func (c *Controller) handleCommitObject(r *http.Request, body []byte) (any, error) {
	var req ctlwire.CommitObjectRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if len(req.Ranges) == 0 || len(req.Ranges) > metadata.MaxCommitRanges {
		return nil, fmt.Errorf("%w: %d ranges (must be 1..%d)", ctlwire.ErrBadRequest, len(req.Ranges), metadata.MaxCommitRanges)
	}
	res, err := c.propose(&commitObjectCmd{ID: req.ID, Broker: req.Broker, Epoch: req.Epoch, Size: req.Size, Ranges: req.Ranges})
	if err != nil {
		return nil, err
	}
	o, _ := res.Value.(metadata.Object)
	return ctlwire.ObjectResponse{Object: o, Version: res.Version}, nil
}

func (c *Controller) handleReplaceRanges(r *http.Request, body []byte) (any, error) {
	var req ctlwire.ReplaceRangesRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if n := len(req.Replace.Replaces); n == 0 || n > metadata.MaxReplaceRanges {
		return nil, fmt.Errorf("%w: %d ranges replaced (must be 1..%d)", ctlwire.ErrBadRequest, n, metadata.MaxReplaceRanges)
	}
	res, err := c.propose(&replaceRangesCmd{ID: req.ID, Broker: req.Broker, Epoch: req.Epoch, Size: req.Size, Replace: req.Replace})
	if err != nil {
		return nil, err
	}
	o, _ := res.Value.(metadata.Object)
	return ctlwire.ObjectResponse{Object: o, Version: res.Version}, nil
}

func (c *Controller) handleDeleteObjects(r *http.Request, body []byte) (any, error) {
	var req ctlwire.DeleteObjectsRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if len(req.IDs) == 0 || len(req.IDs) > metadata.MaxDeleteObjects {
		return nil, fmt.Errorf("%w: %d ids (must be 1..%d)", ctlwire.ErrBadRequest, len(req.IDs), metadata.MaxDeleteObjects)
	}
	res, err := c.propose(&deleteObjectsCmd{IDs: req.IDs})
	if err != nil {
		return nil, err
	}
	n, _ := res.Value.(int)
	return ctlwire.DeleteObjectsResponse{Deleted: n, Version: res.Version}, nil
}
