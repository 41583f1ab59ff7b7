package ctlwire

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/weir-io/weir/metadata"
)

// TestAPIErrorRoundTrip: an error answered by a controller (NewAPIError, through JSON)
// turns back into an error matching every sentinel it matched (its code's and Also's);
// an unknown code is ErrInternal; only not_leader and unavailable are retried.
func TestAPIErrorRoundTrip(t *testing.T) {
	err := fmt.Errorf("%w: %w: epoch 3", metadata.ErrObjectRejected, metadata.ErrFenced)
	ae, status := NewAPIError(err)
	if ae.Code != "object_rejected" || status != http.StatusConflict || len(ae.Also) != 1 || ae.Also[0] != "fenced" {
		t.Fatalf("answer %+v, status %d", ae, status)
	}
	b, _ := json.Marshal(ae)
	var got APIError
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	back := got.ToError()
	if !errors.Is(back, metadata.ErrObjectRejected) || !errors.Is(back, metadata.ErrFenced) || errors.Is(back, ErrInternal) {
		t.Fatalf("round trip: %v", back)
	}
	// The sentinel's text once, then the server's detail (issue 24: it was repeated).
	if head := metadata.ErrObjectRejected.Error(); strings.Count(back.Error(), head) != 1 || !strings.HasSuffix(back.Error(), "epoch 3") {
		t.Fatalf("message %q", back.Error())
	}
	if got := (&APIError{Code: "fenced", Message: "lease lapsed"}).ToError().Error(); got != metadata.ErrFenced.Error()+" (lease lapsed)" {
		t.Fatalf("a message without the sentinel's text: %q", got)
	}
	if ae, status := NewAPIError(errors.New("boom")); ae.Code != CodeInternal || status != http.StatusInternalServerError {
		t.Fatalf("unmatched error answered %+v %d", ae, status)
	}
	if !errors.Is((&APIError{Code: "no_such_code"}).ToError(), ErrInternal) {
		t.Fatal("an unknown code is not ErrInternal")
	}
	for code, want := range map[string]bool{CodeNotLeader: true, CodeUnavailable: true, "fenced": false, CodeUnauthenticated: false} {
		if (&APIError{Code: code}).Retriable() != want {
			t.Errorf("%s retriable: want %v", code, want)
		}
	}
	if errs := APIErrors([]error{nil, ErrNotLeader}, 3); len(errs) != 3 || errs[0] != nil || errs[1].Code != CodeNotLeader || errs[2] != nil {
		t.Fatalf("APIErrors: %+v", errs)
	}
	if (*APIError)(nil).AsError() != nil {
		t.Fatal("a nil item is not success")
	}
}

// TestTopicPath: a topic's name is escaped into its path.
func TestTopicPath(t *testing.T) {
	if p := TopicPath(PathTopicConfigs, "a/b c"); p != "/v1/topics/a%2Fb%20c/configs" {
		t.Fatalf("path %q", p)
	}
}
