package tier

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/weir-io/weir/metadata"
)

// Retention and garbage collection, every Config.RetentionInterval.
//
// Retention (each partition's leader): retention.ms removes the manifest's front objects
// whose newest batch is older than the limit; retention.bytes removes front objects while
// the partition stays at or above the limit without them (Kafka's rule for segments).
// Both act on whole object ranges and never on data still only in the WAL (as Kafka never
// deletes the active segment). The leader raises the log start offset past them, as
// DeleteRecords does; raising the log start drops the manifest ranges below it
// (metadata.TrimManifest), so an object shared with partitions whose data lives on stays
// only as long as they reference it.
//
// Garbage collection (one broker: the active broker with the lowest ID): objects no
// manifest references any more (after retention, DeleteRecords or topic deletion) and
// prepared objects of ended registrations (View.GarbageObjects), and objects still listed
// below a log start (View.ExpiredObjects: state from before manifests were trimmed). The
// key is deleted from object storage first, then from the manifests: whatever view they
// come from, such objects can never be needed again (a committed object no manifest
// references is never referenced again, a log start only rises, an ended registration
// commits nothing), so a stale view is safe.
//
// Every broker also deletes its own prepared objects that no upload is using (a commit
// was refused, or its answer lost). That is NOT safe from a stale view: after a
// CommitObject whose answer was lost, the object is committed and referenced by manifests
// while a view that lags (a partition from the controllers) still shows it prepared.
// So these go the other way round: the controller forgets the object first (it refuses a
// committed object a manifest references: metadata.ObjectRules.Delete), and the key is
// deleted only once it confirmed. A key delete that fails then leaves a key without an
// object record, which sweepStrayKeys removes.

// RetentionRound applies retention and collects garbage once.
func (t *Tier) RetentionRound() {
	t.applyRetention()
	t.collectGarbage()
}

// applyRetention raises the log start of partitions led here past expired objects.
func (t *Tier) applyRetention() {
	v := t.d.Meta.View()
	now := t.d.Now().UnixMilli()
	for _, p := range t.d.Led() {
		tp := v.TopicByID(p.ID())
		if tp == nil || !deletesByRetention(tp) {
			continue
		}
		ms := topicInt(tp, "retention.ms")
		bytes := topicInt(tp, "retention.bytes")
		if start := p.RetentionStart(now, ms, bytes); start > 0 {
			ctx, cancel := context.WithTimeout(t.ctx, 10*time.Second)
			err := t.d.Meta.SetLogStartOffset(ctx, p.ID(), p.Index(), start)
			cancel()
			if err != nil {
				t.log.Warn("retention: raising the log start failed", "topic", p.Topic(), "partition", p.Index(), "offset", start, "err", err)
				continue
			}
			t.metrics.retained.Inc()
			t.log.Info("retention: log start raised", "topic", p.Topic(), "partition", p.Index(), "log_start", start)
		}
	}
}

// deletesByRetention: Kafka applies retention only with cleanup.policy "delete" (alone
// or with compact). A compact-only topic keeps every key's latest record (compact.go).
// __consumer_offsets is compacted in Kafka: its commits stay here too (a group that
// commits rarely must not lose its offsets to retention.ms).
func deletesByRetention(t *metadata.Topic) bool {
	if t.Name == metadata.OffsetsTopic { // committed offsets: retention never applies
		return false
	}
	policy, _ := t.Config("cleanup.policy")
	return strings.Contains(policy, "delete")
}

func topicInt(t *metadata.Topic, key string) int64 {
	s, _ := t.Config(key)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// gcDuty reports whether this broker collects garbage: the lowest active ID (or the only
// broker of a single-node store).
func (t *Tier) gcDuty(v *metadata.View) bool {
	if self, ok := v.Broker(t.d.NodeID); ok && self.Draining() {
		return false // about to leave: the next broker takes the duty
	}
	for _, br := range v.Brokers {
		if br.Accepting() && br.ID < t.d.NodeID {
			return false
		}
	}
	return true
}

// collectGarbage deletes the objects no one needs any more.
func (t *Tier) collectGarbage() {
	if t.d.LeaseOK != nil && !t.d.LeaseOK() {
		return // cut off from the controllers: the view may be stale, delete nothing
	}
	v := t.d.Meta.View()
	t.forgetOwnPrepared(t.ownStalePrepared(v))
	if !t.gcDuty(v) {
		return
	}
	t.deleteObjects(v.ExpiredObjects(), "expired")
	t.deleteObjects(v.GarbageObjects(), "garbage")
	if t.gcRounds++; t.gcRounds%sweepEvery == 1 {
		t.sweepStrayKeys(v)
	}
}

// sweepEvery: stray keys are looked for every this many collections (a LIST of the whole
// prefix is not free).
const sweepEvery = 10

// sweepStrayKeys deletes keys under objects/ that no object record stands for: a PUT that
// landed after garbage collection had already deleted its prepared record (a fenced
// broker's late upload). Object IDs only grow, so a key whose ID is below the highest ID
// in the table but not in it was deleted from the table: it is garbage whatever its age.
func (t *Tier) sweepStrayKeys(v *metadata.View) {
	var top uint64
	for id := range v.Objects {
		top = max(top, id)
	}
	if top == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(t.ctx, time.Minute)
	defer cancel()
	infos, err := t.objects.List(ctx, "objects/")
	if err != nil {
		t.log.Warn("listing objects for stray keys failed", "err", err)
		return
	}
	n := 0
	for _, in := range infos {
		var id uint64
		if _, err := fmt.Sscanf(in.Key, "objects/%d.obj", &id); err != nil || id >= top || in.Key != metadata.ObjectKey(id) {
			continue
		}
		if _, ok := v.Object(id); ok {
			continue
		}
		if err := t.objects.Delete(ctx, in.Key); err != nil {
			t.log.Warn("deleting a stray object failed", "key", in.Key, "err", err)
			return
		}
		t.reader.Forget(in.Key)
		n++
	}
	if n > 0 {
		t.metrics.deleted.WithLabelValues("stray").Add(float64(n))
		t.log.Info("stray objects deleted", "objects", n)
	}
}

// ownStalePrepared lists this broker's prepared objects that no upload uses and that were
// already unused at the previous collection (so one being prepared right now is spared).
func (t *Tier) ownStalePrepared(v *metadata.View) []metadata.Object {
	self, ok := v.Broker(t.d.NodeID)
	t.upMu.Lock()
	defer t.upMu.Unlock()
	if t.preparing > 0 {
		return nil // an ID being prepared may be in v and not yet in inflight: next round
	}
	seen := map[uint64]bool{}
	var out []metadata.Object
	for _, o := range v.Objects {
		if !ok || o.State != metadata.ObjectPrepared || o.Broker != self.ID || o.Epoch != self.Epoch || t.inflight[o.ID] {
			continue
		}
		if t.unusedPrepared[o.ID] {
			out = append(out, o)
		}
		seen[o.ID] = true
	}
	t.unusedPrepared = seen
	return out
}

// forgetOwnPrepared deletes this broker's own unused prepared objects, the controller's
// record first and the key after (see the top of this file): objs come from this broker's
// view, which may still show prepared an object the controller has committed.
func (t *Tier) forgetOwnPrepared(objs []metadata.Object) {
	if len(objs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(t.ctx, time.Minute)
	defer cancel()
	n := 0
	for _, o := range objs {
		// One at a time: an object committed behind this broker's back is refused, and
		// must not hold back the others (the controller refuses a batch as a whole).
		if err := t.manifest.DeleteObjects(ctx, []uint64{o.ID}); err != nil {
			if errors.Is(err, metadata.ErrObjectRejected) {
				t.log.Warn("own prepared object kept: the controller refused to forget it (committed, and this broker's view is behind?)",
					"key", o.Key, "err", err)
			} else {
				t.log.Warn("forgetting an own prepared object failed; retrying later", "key", o.Key, "err", err)
			}
			continue
		}
		t.reader.Forget(o.Key)
		n++
		if err := t.objects.Delete(ctx, o.Key); err != nil {
			t.log.Warn("deleting a forgotten object's key failed; the stray-key sweep removes it", "key", o.Key, "err", err)
		}
	}
	if n > 0 {
		t.metrics.deleted.WithLabelValues("orphan").Add(float64(n))
		t.log.Info("own unused prepared objects deleted", "objects", n)
	}
}

// deleteObjects deletes objs from object storage, then from the manifests. Only for
// objects that no view, however stale, can wrongly show unneeded (View.GarbageObjects,
// View.ExpiredObjects). If a key cannot be deleted, nothing is forgotten this round (the
// batch must stay acceptable).
func (t *Tier) deleteObjects(objs []metadata.Object, why string) {
	if len(objs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(t.ctx, time.Minute)
	defer cancel()
	ids := make([]uint64, 0, len(objs))
	seen := map[uint64]bool{}
	for _, o := range objs {
		if seen[o.ID] {
			continue
		}
		seen[o.ID] = true
		if err := t.objects.Delete(ctx, o.Key); err != nil {
			t.log.Warn("deleting an object failed; retrying later", "key", o.Key, "why", why, "err", err)
			return
		}
		t.reader.Forget(o.Key)
		ids = append(ids, o.ID)
	}
	if err := t.manifest.DeleteObjects(ctx, ids); err != nil {
		t.log.Warn("forgetting deleted objects failed; retrying later", "objects", len(ids), "why", why, "err", err)
		return
	}
	t.metrics.deleted.WithLabelValues(why).Add(float64(len(ids)))
	t.log.Info("objects deleted", "objects", len(ids), "why", why)
}
