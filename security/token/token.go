// Package token reads a cluster's shared secret tokens from a file: what brokers,
// controllers and `weir admin` prove to each other on the controller API (a bearer
// token) and on broker-to-broker (peer) connections (an HMAC challenge-response, broker/peer).
//
// The file holds one token per line (blank lines and lines starting with # are
// ignored). The first token is the one this process presents; every token in the file
// is accepted from others. That makes rotation possible without downtime: add the new
// token as a second line everywhere, then make it the first line everywhere, then remove
// the old one. The file is read again when it changes (checked at most once per
// CheckEvery), so no step needs a restart; a file that becomes unreadable or empty keeps
// the previous tokens in use and is logged.
//
// Tokens are never logged. Generate one with `weir admin token` (or
// `openssl rand -base64 32`).
package token

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// ErrConfig marks an unusable token file.
var ErrConfig = errors.New("token: bad cluster token file")

// MinLen is the shortest token accepted: shorter ones are guessable.
const MinLen = 16

// CheckEvery bounds how often the file is looked at.
const CheckEvery = time.Second

// File is a token file, reloaded when it changes. Safe for concurrent use.
type File struct {
	path string
	log  *slog.Logger
	now  func() time.Time

	mu      sync.Mutex
	checked time.Time
	mod     time.Time
	size    int64
	tokens  [][]byte
}

// Load reads the file once (an error here is fatal) and returns it. log may be nil.
func Load(path string, log *slog.Logger) (*File, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &File{path: path, log: log, now: time.Now}
	if err := f.reload(true); err != nil {
		return nil, err
	}
	return f, nil
}

// Static returns tokens that never change (tests, embedders).
func Static(tokens ...string) (*File, error) {
	f := &File{now: time.Now}
	for _, t := range tokens {
		if len(t) < MinLen {
			return nil, fmt.Errorf("%w: a token of %d bytes (at least %d)", ErrConfig, len(t), MinLen)
		}
		f.tokens = append(f.tokens, []byte(t))
	}
	if len(f.tokens) == 0 {
		return nil, fmt.Errorf("%w: no token", ErrConfig)
	}
	return f, nil
}

// Parse returns the tokens of a file's content.
func Parse(b []byte) ([][]byte, error) {
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(b))
	for line := 1; sc.Scan(); line++ {
		t := bytes.TrimSpace(sc.Bytes())
		if len(t) == 0 || t[0] == '#' {
			continue
		}
		if len(t) < MinLen {
			// The length only: the token itself must not reach a log.
			return nil, fmt.Errorf("%w: line %d holds a token of %d bytes (at least %d)", ErrConfig, line, len(t), MinLen)
		}
		out = append(out, bytes.Clone(t))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no token in it", ErrConfig)
	}
	return out, nil
}

func (f *File) reload(first bool) error {
	if f.path == "" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if !first && now.Sub(f.checked) < CheckEvery {
		return nil
	}
	f.checked = now
	st, err := os.Stat(f.path)
	if err == nil && !first && st.ModTime().Equal(f.mod) && st.Size() == f.size {
		return nil
	}
	var toks [][]byte
	if err == nil {
		var b []byte
		if b, err = os.ReadFile(f.path); err == nil {
			toks, err = Parse(b)
		}
	}
	if err != nil {
		err = fmt.Errorf("%w: %s: %w", ErrConfig, f.path, err)
		if first {
			return err
		}
		f.log.Warn("cluster token file changed but could not be read; the previous tokens stay in use", "err", err)
		return nil
	}
	f.mod, f.size, f.tokens = st.ModTime(), st.Size(), toks
	if st.Mode().Perm()&0o077 != 0 {
		f.log.Warn("cluster token file is readable by group or others; chmod 600 it", "path", f.path, "mode", st.Mode().Perm().String())
	}
	if !first {
		f.log.Info("cluster token file reloaded", "path", f.path, "tokens", len(toks))
	}
	return nil
}

// Current is the token this process presents (the file's first).
func (f *File) Current() []byte {
	f.reload(false)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokens[0]
}

// All is every accepted token, the current one first.
func (f *File) All() [][]byte {
	f.reload(false)
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokens
}

// Match reports whether got is one of the accepted tokens. Every token is compared, in
// constant time, so the answer's timing tells nothing about which (or how much) matched.
func (f *File) Match(got []byte) bool {
	ok := 0
	for _, t := range f.All() {
		ok |= subtle.ConstantTimeCompare(t, got)
	}
	return ok == 1 && len(got) > 0
}

// Generate returns a new random token (32 bytes, base64url).
func Generate() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Purposes of the keys derived from a cluster token. Each use gets its own key, so what
// one side learns cannot be replayed on another: a controller (or anyone who sees a
// controller API request) holds only the controller-API key, never the key of the
// peer connections' HMAC challenge (the peer key), and the other way round. The values
// are fixed: keys are derived from them, so every broker of a cluster must use the same.
const (
	PurposeControllerAPI = "weir controller api v1"
	PurposePeer          = "weir broker link v1" // the historical label of the peer key
)

// Derive returns the key for purpose derived from a cluster token: HMAC-SHA256 keyed by
// the token over the purpose label (HKDF's extract-and-expand is not needed: the token
// is already uniformly random, Generate, and one 32-byte output is enough).
func Derive(tok []byte, purpose string) []byte {
	m := hmac.New(sha256.New, tok)
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// Key is the key this process presents for purpose (derived from Current).
func (f *File) Key(purpose string) []byte { return Derive(f.Current(), purpose) }

// Keys is every accepted key for purpose, the current one first.
func (f *File) Keys(purpose string) [][]byte {
	all := f.All()
	out := make([][]byte, len(all))
	for i, t := range all {
		out[i] = Derive(t, purpose)
	}
	return out
}

// Bearer is the controller API's bearer token: the controller-API key, base64url.
func (f *File) Bearer() string {
	return base64.RawURLEncoding.EncodeToString(f.Key(PurposeControllerAPI))
}

// MatchBearer reports whether got is the bearer of one of the accepted tokens, comparing
// every one in constant time.
func (f *File) MatchBearer(got []byte) bool {
	ok := 0
	for _, k := range f.Keys(PurposeControllerAPI) {
		ok |= subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(k)), got)
	}
	return ok == 1 && len(got) > 0
}
