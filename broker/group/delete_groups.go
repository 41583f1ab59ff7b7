package group

// DeleteGroups (API key 42), versions 0-3.
//
// Behaviour (Kafka): per group, GROUP_ID_NOT_FOUND if unknown (or already
// being deleted), NON_EMPTY_GROUP unless the group is Empty. An Empty group
// turns Dead at once (joins and commits then get COORDINATOR_NOT_AVAILABLE),
// a deletion record (Record.Deleted) is written through the Store, and once
// that is durable the group and its offsets (pending transactional ones too, as
// Kafka's deletion tombstones them) are
// dropped (the name can then be reused by a fresh group). If the store
// fails, the group goes back to Empty with its offsets and the error is
// reported with Kafka's mapping (see storeErrorCode). v3+ carry an error
// message for failed groups. The response is sent once every group is done.

import (
	"context"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (c *Coordinator) handleDeleteGroups(ctx context.Context, r *kmsg.DeleteGroupsRequest, respond func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.DeleteGroupsResponse)
	resp.Groups = make([]kmsg.DeleteGroupsResponseGroup, len(r.Groups))
	var remaining atomic.Int64
	remaining.Store(int64(len(r.Groups)) + 1)
	// done marks one group finished; the last one sends the response
	// (through send when a group lock is held).
	done := func(send func(func(kmsg.Response), kmsg.Response)) {
		if remaining.Add(-1) == 0 {
			send(respond, resp)
		}
	}
	direct := func(f func(kmsg.Response), resp kmsg.Response) { f(resp) }
	set := func(i int, code int16) {
		dg := &resp.Groups[i]
		dg.ErrorCode = code
		if code != 0 && r.Version >= 3 {
			dg.ErrorMessage = strp(kerr.TypedErrorForCode(code).Description)
		}
	}
	for i, name := range r.Groups {
		resp.Groups[i].Default()
		resp.Groups[i].Group = name
		g := c.lockedGroup(name, false)
		if g == nil {
			set(i, kerr.GroupIDNotFound.Code)
			done(direct)
			continue
		}
		switch g.state {
		case stateDead:
			set(i, kerr.GroupIDNotFound.Code)
			done(g.send)
		case stateEmpty:
			g.deleteGroup(ctx, func(code int16) {
				set(i, code)
				done(g.send)
			})
		default:
			set(i, kerr.NonEmptyGroup.Code)
			done(g.send)
		}
		g.unlock()
	}
	done(direct)
}

// deleteGroup writes the group's deletion (Record.Deleted: its offsets and membership
// are gone) and removes it. finish runs with the group locked once the outcome is known.
func (g *group) deleteGroup(ctx context.Context, finish func(code int16)) {
	g.transition(stateDead)
	g.enqueueWrite(&write{
		ctx:     ctx,
		deleted: true,
		apply: func(err error) {
			if err != nil {
				g.transition(stateEmpty)
				finish(storeErrorCode(err, kerr.UnknownServerError.Code))
				return
			}
			clear(g.offsets)
			g.txn = txnOffsets{}
			g.meta = nil
			g.cg = nil
			if !g.removed {
				g.removeFromCoordinator()
			}
			finish(0)
		},
	})
}
