package zonelab

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/weir-io/weir/test/nfsfs"
)

// walRoot is the --wal-root of broker process name: the shared <Dir>/wal, or under
// Config.FSx a mount of it of the broker's own.
func (l *Lab) walRoot(name string) (string, error) {
	shared := filepath.Join(l.cfg.Dir, "wal")
	if l.cfg.FSx == nil {
		return shared, nil
	}
	if err := os.MkdirAll(shared, 0o755); err != nil {
		return "", err
	}
	m, err := nfsfs.New(filepath.Join(l.cfg.Dir, "mnt-"+name), shared, l.cfg.FSx, nfsfs.Options{Name: name})
	if err != nil {
		return "", err
	}
	l.mounts = append(l.mounts, m)
	return m.Dir, nil
}

// Partition cuts zone off from every other zone and from the control namespace (the
// controllers): the zone's ends of its veths go down, so packets neither leave nor
// enter it (established connections stall, as in a real partition; nothing is reset).
// Inside the zone, its clients still reach its brokers; the file system (the lab's
// FUSE mounts, served outside every namespace) stays reachable: the case Weir's
// storage fence exists for.
func (l *Lab) Partition(zone string) error { return l.setVeths(zone, "down") }

// Heal undoes Partition.
func (l *Lab) Heal(zone string) error { return l.setVeths(zone, "up") }

func (l *Lab) setVeths(zone, state string) error {
	if err := l.checkZone(zone); err != nil {
		return err
	}
	for _, peer := range l.ends() {
		if peer == zone {
			continue
		}
		if _, err := ip("-n", l.Namespace(zone), "link", "set", vethName(peer), state); err != nil {
			return fmt.Errorf("zonelab: veth %s of zone %s %s: %w", vethName(peer), zone, state, err)
		}
		if state == "up" {
			// Setting a device down flushed the routes over it (at the peer's end,
			// only the carrier went: its routes stay).
			if _, err := ip("-n", l.Namespace(zone), "route", "replace", l.subnet(peer)+".0/24", "dev", vethName(peer), "src", l.HostAddr(zone)); err != nil {
				return fmt.Errorf("zonelab: route of zone %s to %s: %w", zone, peer, err)
			}
		}
	}
	return nil
}

// ZoneBrokers are the brokers of zone.
func (l *Lab) ZoneBrokers(zone string) []*Proc {
	var out []*Proc
	for _, b := range l.Brokers {
		if b.Zone == zone {
			out = append(out, b)
		}
	}
	return out
}
