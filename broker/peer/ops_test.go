package peer

import "testing"

// Every op has a code of its own: two ops sharing a byte (the link ops were once given
// the codes of the authentication ops) make a leader read a link as an authentication
// message, and every link of a cluster with tokens fails.
func TestOpCodesDistinct(t *testing.T) {
	ops := map[string]byte{
		"OpLinkV1": OpLinkV1, "OpOffsets": OpOffsets, "OpFollow": OpFollow, "OpWake": OpWake,
		"OpLink": OpLink, "OpFenceLinks": OpFenceLinks, "OpChallenge": OpChallenge, "OpAuth": OpAuth,
		"OpMoveReady": OpMoveReady, "OpFollowTxn": OpFollowTxn,
		"OpMarkers": OpMarkers, "OpVerifyTxn": OpVerifyTxn, "OpShareState": OpShareState,
	}
	seen := map[byte]string{}
	for name, op := range ops {
		if other, ok := seen[op]; ok {
			t.Fatalf("%s and %s share op %d", name, other, op)
		}
		seen[op] = name
	}
}
