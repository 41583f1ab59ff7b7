package metadata

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
)

// SCRAM credentials (SASL/SCRAM logins to the Kafka listeners). The metadata holds, per
// user and mechanism, the salt, the iteration count, StoredKey and ServerKey (RFC 5802):
// never a password, nor the salted password AlterUserScramCredentials carries (the broker
// derives the keys before the change reaches a store). The keys are still secrets: a
// ScramCredential formats (String, slog) without them, and nothing logs them.
//
// Alterations follow Kafka's controller (ScramControlManager): at most one alteration
// per user in a request (DUPLICATE_RESOURCE for every alteration of a user named twice),
// a non-empty user name, mechanism 1 or 2, iterations in 4096..16384, deletion of an
// existing credential only (RESOURCE_NOT_FOUND); results are per user, and the valid
// alterations of a request apply together.

// Sentinel errors of SCRAM alterations; the front end maps them to Kafka codes.
var (
	// ErrScramNotFound: no such credential (RESOURCE_NOT_FOUND).
	ErrScramNotFound = errors.New("metadata: no such SCRAM credential")
	// ErrScramMechanism: not SCRAM-SHA-256 (1) or SCRAM-SHA-512 (2)
	// (UNSUPPORTED_SASL_MECHANISM).
	ErrScramMechanism = errors.New("metadata: unknown SCRAM mechanism")
	// ErrScramCredential: the credential is unacceptable (empty user name, iterations
	// out of bounds, keys of the wrong size) (UNACCEPTABLE_CREDENTIAL).
	ErrScramCredential = errors.New("metadata: unacceptable SCRAM credential")
	// ErrScramDuplicate: the user is altered twice in one request (DUPLICATE_RESOURCE).
	ErrScramDuplicate = errors.New("metadata: a user credential cannot be altered twice in the same request")
)

// ScramMechanism is Kafka's number of a SCRAM mechanism.
type ScramMechanism int8

const (
	ScramSHA256 ScramMechanism = 1
	ScramSHA512 ScramMechanism = 2
)

// Iteration bounds (Kafka's).
const (
	ScramMinIterations = 4096
	ScramMaxIterations = 16384
)

// MaxScramAlterations bounds one alteration request.
const MaxScramAlterations = 1000

func (m ScramMechanism) String() string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return fmt.Sprintf("UNKNOWN(%d)", int8(m))
}

// Valid reports whether m is SCRAM-SHA-256 or SCRAM-SHA-512.
func (m ScramMechanism) Valid() bool { return m == ScramSHA256 || m == ScramSHA512 }

// KeySize is the size of m's StoredKey and ServerKey.
func (m ScramMechanism) KeySize() int {
	if m == ScramSHA512 {
		return 64
	}
	return 32
}

// ParseScramMechanism parses "SCRAM-SHA-256" or "SCRAM-SHA-512".
func ParseScramMechanism(s string) (ScramMechanism, bool) {
	switch s {
	case "SCRAM-SHA-256":
		return ScramSHA256, true
	case "SCRAM-SHA-512":
		return ScramSHA512, true
	}
	return 0, false
}

// ScramCredential is one user's credential for one mechanism.
type ScramCredential struct {
	Mechanism  ScramMechanism `json:"mechanism"`
	Iterations int32          `json:"iterations"`
	Salt       []byte         `json:"salt"`
	StoredKey  []byte         `json:"stored_key"`
	ServerKey  []byte         `json:"server_key"`
}

// String shows the mechanism and iterations only.
func (c ScramCredential) String() string {
	return fmt.Sprintf("%s(%d iterations)", c.Mechanism, c.Iterations)
}

// LogValue keeps the keys out of structured logs.
func (c ScramCredential) LogValue() slog.Value { return slog.StringValue(c.String()) }

// ScramUsers maps a user name to its credentials, one per mechanism in ascending
// mechanism order. Copy-on-write: a change makes a new map (and new slices), so Views
// share it safely.
type ScramUsers map[string][]ScramCredential

// Credential finds user's credential for m.
func (u ScramUsers) Credential(user string, m ScramMechanism) (ScramCredential, bool) {
	for _, c := range u[user] {
		if c.Mechanism == m {
			return c, true
		}
	}
	return ScramCredential{}, false
}

// Names lists the users in order.
func (u ScramUsers) Names() []string {
	return slices.Sorted(maps.Keys(u))
}

// ScramAlteration is one change: Delete removes User's credential of Mechanism;
// otherwise Credential (of the same Mechanism) replaces or adds it.
type ScramAlteration struct {
	User       string          `json:"user"`
	Mechanism  ScramMechanism  `json:"mechanism"`
	Delete     bool            `json:"delete,omitempty"`
	Credential ScramCredential `json:"credential,omitzero"`
}

// ScramResult is the outcome for one user of an alteration request.
type ScramResult struct {
	User string
	Err  error // nil, or wrapping one of the ErrScram* sentinels
}

// ScramStore is implemented by stores that keep SCRAM credentials (the controller's
// client, LocalStore). The credentials themselves are in View.Scram.
type ScramStore interface {
	// AlterScram applies alterations by Kafka's rules (see above) and returns one result
	// per user named, in order of first mention. The error is for the request as a
	// whole (the store unreachable): then nothing is known to have changed.
	AlterScram(ctx context.Context, alterations []ScramAlteration) ([]ScramResult, error)
}

// ApplyScram computes the credentials after alterations: the new table (cur itself
// when nothing applies) and the per-user results. Deterministic: the controller's
// state machine and LocalStore both use it.
func ApplyScram(cur ScramUsers, alterations []ScramAlteration) (ScramUsers, []ScramResult) {
	var order []string
	seen := map[string]bool{}
	errs := map[string]error{}
	byUser := map[string]ScramAlteration{}
	for _, a := range alterations {
		if seen[a.User] {
			// A second alteration of the user: the user's first error stands, else both
			// are refused.
			delete(byUser, a.User)
			if errs[a.User] == nil {
				errs[a.User] = ErrScramDuplicate
			}
			continue
		}
		seen[a.User] = true
		order = append(order, a.User)
		if err := checkScramAlteration(cur, a); err != nil {
			errs[a.User] = err
			continue
		}
		byUser[a.User] = a
	}
	results := make([]ScramResult, len(order))
	next := cur
	if len(byUser) > 0 {
		next = make(ScramUsers, len(cur)+len(byUser))
		maps.Copy(next, cur)
	}
	for i, user := range order {
		results[i] = ScramResult{User: user, Err: errs[user]}
		a, ok := byUser[user]
		if !ok {
			continue
		}
		creds := slices.DeleteFunc(slices.Clone(next[user]), func(c ScramCredential) bool { return c.Mechanism == a.Mechanism })
		if !a.Delete {
			c := a.Credential
			c.Salt, c.StoredKey, c.ServerKey = slices.Clone(c.Salt), slices.Clone(c.StoredKey), slices.Clone(c.ServerKey)
			creds = append(creds, c)
			sort.Slice(creds, func(i, j int) bool { return creds[i].Mechanism < creds[j].Mechanism })
		}
		if len(creds) == 0 {
			delete(next, user)
		} else {
			next[user] = creds
		}
	}
	return next, results
}

func checkScramAlteration(cur ScramUsers, a ScramAlteration) error {
	if a.User == "" {
		return fmt.Errorf("%w: username must not be empty", ErrScramCredential)
	}
	if !a.Mechanism.Valid() {
		return fmt.Errorf("%w: %d", ErrScramMechanism, int8(a.Mechanism))
	}
	if a.Delete {
		if _, ok := cur.Credential(a.User, a.Mechanism); !ok {
			return fmt.Errorf("%w: attempt to delete a user credential that does not exist", ErrScramNotFound)
		}
		return nil
	}
	c := a.Credential
	switch {
	case c.Mechanism != a.Mechanism:
		return fmt.Errorf("%w: credential of mechanism %s for %s", ErrScramCredential, c.Mechanism, a.Mechanism)
	case c.Iterations < ScramMinIterations:
		return fmt.Errorf("%w: too few iterations (%d, minimum %d)", ErrScramCredential, c.Iterations, ScramMinIterations)
	case c.Iterations > ScramMaxIterations:
		return fmt.Errorf("%w: too many iterations (%d, maximum %d)", ErrScramCredential, c.Iterations, ScramMaxIterations)
	case len(c.Salt) == 0:
		return fmt.Errorf("%w: empty salt", ErrScramCredential)
	case len(c.StoredKey) != a.Mechanism.KeySize() || len(c.ServerKey) != a.Mechanism.KeySize():
		return fmt.Errorf("%w: keys of the wrong size for %s", ErrScramCredential, a.Mechanism)
	}
	return nil
}
