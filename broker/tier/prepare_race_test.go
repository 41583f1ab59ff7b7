package tier

import (
	"context"
	"testing"

	"github.com/weir-io/weir/metadata"
)

// pausingManifest holds PrepareObject after the object is prepared (in the view) and
// before the tier learns its ID, while the test runs collection rounds.
type pausingManifest struct {
	metadata.ObjectManifest
	prepared chan metadata.Object
	release  chan struct{}
}

func (m *pausingManifest) PrepareObject(ctx context.Context) (metadata.Object, error) {
	o, err := m.ObjectManifest.PrepareObject(ctx)
	if err == nil {
		m.prepared <- o
		<-m.release
	}
	return o, err
}

// Collection never takes an object being prepared for one abandoned: however many rounds
// run between the prepare and the uploader marking the ID in use, it is not listed for
// deletion (seen as a commit refused with "object was deleted" when collection ran every
// 5 ms on a loaded machine). Once in use it is spared as before; once abandoned, two
// rounds later it is collected.
func TestCollectionSparesAnObjectBeingPrepared(t *testing.T) {
	pm := &pausingManifest{prepared: make(chan metadata.Object, 1), release: make(chan struct{})}
	r := newRig(t, rigOpts{manifest: func(m metadata.ObjectManifest) metadata.ObjectManifest {
		pm.ObjectManifest = m
		return pm
	}})
	got := make(chan metadata.Object, 1)
	go func() {
		o, err := r.tr.prepareObject(context.Background())
		if err != nil {
			t.Error(err)
		}
		got <- o
	}()
	o := <-pm.prepared
	for round := 0; round < 3; round++ {
		if stale := r.tr.ownStalePrepared(r.meta.View()); len(stale) != 0 {
			t.Fatalf("round %d during the prepare: %v listed for deletion", round, stale)
		}
	}
	close(pm.release)
	if p := <-got; p.ID != o.ID {
		t.Fatalf("prepared %d, the manifest said %d", p.ID, o.ID)
	}
	for round := 0; round < 3; round++ {
		if stale := r.tr.ownStalePrepared(r.meta.View()); len(stale) != 0 {
			t.Fatalf("round %d while in use: %v listed for deletion", round, stale)
		}
	}
	r.tr.abandon(o.ID)
	r.tr.ownStalePrepared(r.meta.View())
	if stale := r.tr.ownStalePrepared(r.meta.View()); len(stale) != 1 || stale[0].ID != o.ID {
		t.Fatalf("abandoned object, second round: %v listed, want object %d", stale, o.ID)
	}
}
