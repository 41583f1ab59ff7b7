package peer

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestAuthRoundTrip(t *testing.T) {
	tok := []byte("cluster-token-0123456789")
	nonce := NewNonce()
	req := AuthRequest{Broker: 4, ClientNonce: NewNonce()}
	req.MAC = ClientMAC(tok, nonce, req.ClientNonce, req.Broker)
	got, err := DecodeAuthRequest(req.AppendTo(nil))
	if err != nil || got.Broker != 4 || !bytes.Equal(got.MAC, req.MAC) || !bytes.Equal(got.ClientNonce, req.ClientNonce) {
		t.Fatalf("decode: %+v %v", got, err)
	}
	ans, ok := VerifyAuth([][]byte{[]byte("another-token-0123456789"), tok}, nonce, got)
	if !ok {
		t.Fatal("the second accepted token was not recognised")
	}
	if err := checkAuthAnswer(ans, tok, nonce, req.ClientNonce, 4); err != nil {
		t.Fatalf("server proof: %v", err)
	}
	// The proof binds the broker ID and both nonces.
	for name, r := range map[string]AuthRequest{
		"other broker":       {Broker: 5, ClientNonce: req.ClientNonce, MAC: req.MAC},
		"other client nonce": {Broker: 4, ClientNonce: NewNonce(), MAC: req.MAC},
	} {
		if _, ok := VerifyAuth([][]byte{tok}, nonce, r); ok {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, ok := VerifyAuth([][]byte{tok}, NewNonce(), got); ok {
		t.Error("a proof for another nonce was accepted")
	}
	if _, ok := VerifyAuth([][]byte{tok}, nil, got); ok {
		t.Error("a proof without a nonce was accepted")
	}
	// A server that does not know the token cannot fake its proof.
	fake := binary.BigEndian.AppendUint16(nil, 0)
	fake = append(fake, ServerMAC([]byte("not-the-token-0123456789"), nonce, req.ClientNonce, 4)...)
	if err := checkAuthAnswer(fake, tok, nonce, req.ClientNonce, 4); err == nil {
		t.Error("a server proof made with another token was accepted")
	}
}

// FuzzAuth: the auth request decoder and the verification of proofs and answers never
// panic; whatever decodes re-encodes to the same bytes; random proofs never pass.
func FuzzAuth(f *testing.F) {
	tok := []byte("cluster-token-0123456789")
	nonce := bytes.Repeat([]byte{7}, NonceLen)
	req := AuthRequest{Broker: 1, ClientNonce: bytes.Repeat([]byte{1}, NonceLen)}
	req.MAC = ClientMAC(tok, nonce, req.ClientNonce, 1)
	f.Add(req.AppendTo(nil))
	f.Add([]byte{OpAuth})
	f.Add([]byte{OpChallenge})
	ans, _ := VerifyAuth([][]byte{tok}, nonce, req)
	f.Add(ans)
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := DecodeAuthRequest(b); err == nil {
			if !bytes.Equal(r.AppendTo(nil), b) {
				t.Fatal("auth request re-encodes differently")
			}
			if _, ok := VerifyAuth([][]byte{tok}, nonce, r); ok && !bytes.Equal(b, req.AppendTo(nil)) {
				t.Fatal("a proof other than the real one was accepted")
			}
		}
		_ = checkAuthAnswer(b, tok, nonce, req.ClientNonce, 1)
	})
}
