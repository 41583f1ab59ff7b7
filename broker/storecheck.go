package broker

import (
	"errors"
	"fmt"
	"strings"

	"github.com/weir-io/weir/metadata"
)

// ErrStoreLacks: the metadata store holds a lease (metadata.Leaser: the broker is one of
// a cluster) but lacks an interface a broker of a cluster calls.
var ErrStoreLacks = errors.New("broker: the metadata store lacks what a broker of a cluster needs")

// checkStore refuses, before anything starts, a store that holds leases (a cluster's:
// partitions fail over to this broker and move off it) but is not everything such a
// broker asks of it by type assertion. Without the check the broker would learn it
// only when a partition waited on the missing call (a recovery never completed, a
// hand-off never made), with a log line. A store without leases (LocalStore, metatest)
// is a standalone one: the broker uses what it offers. The controller's client is
// checked against each interface at compile time (controller/ctlclient).
func (b *Broker) checkStore() error {
	if _, ok := b.meta.(metadata.Leaser); !ok {
		return nil
	}
	var missing []string
	need := func(ok bool, what string) {
		if !ok {
			missing = append(missing, what)
		}
	}
	_, ok := b.meta.(metadata.Registrar)
	need(ok, "metadata.Registrar (registration)")
	_, ok = b.meta.(metadata.Recoverer)
	need(ok, "metadata.Recoverer (completing failovers)")
	_, ok = b.meta.(metadata.MoveCompleter)
	need(ok, "metadata.MoveCompleter (hand-offs)")
	if b.cfg.ACL.Authorizer != "" {
		_, ok = b.meta.(metadata.ControllerAuth)
		need(ok, "metadata.ControllerAuth (--authorizer acl asks whether the controllers' API is open)")
	}
	if b.cfg.Objects != nil {
		_, ok = b.meta.(metadata.ObjectManifest)
		need(ok, "metadata.ObjectManifest (an object store is configured)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: %T holds leases but is not %s", ErrStoreLacks, b.meta, strings.Join(missing, ", "))
	}
	return nil
}
