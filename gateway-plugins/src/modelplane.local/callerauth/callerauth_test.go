package callerauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

type seen struct{ header http.Header }

func (s *seen) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	s.header = req.Header.Clone()
	rw.WriteHeader(http.StatusOK)
}

func setup(t *testing.T, cfg *Config, callers map[string]string) (http.Handler, *seen) {
	t.Helper()
	dir := t.TempDir()
	for name, key := range callers {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(key), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg.KeysDir = dir
	if cfg.CallerHeader == "" {
		cfg.CallerHeader = "x-modelplane-caller"
	}
	next := &seen{}
	h, err := New(context.Background(), next, cfg, t.Name())
	if err != nil {
		t.Fatal(err)
	}
	return h, next
}

func call(h http.Handler, headers map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	for k, v := range headers {
		req.Header.Add(k, v) // canonical keys, as Go's server stores what a client sent
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func errorCode(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	var body struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("not an OpenAI-shaped error: %q", rec.Body.String())
	}
	return body.Error.Code
}

func TestKeysBecomeIdentitiesAndNeverTravel(t *testing.T) {
	sum := sha256.Sum256([]byte("bob-key"))
	h, next := setup(t, &Config{}, map[string]string{"alice": "alice-key\n", "bob": "sha256:" + hex.EncodeToString(sum[:])})
	cases := []struct {
		name    string
		headers map[string]string
		status  int
		caller  string
	}{
		{"no key", nil, 401, ""},
		{"wrong key", map[string]string{"Authorization": "Bearer nope"}, 401, ""},
		{"not bearer", map[string]string{"Authorization": "Basic YWxpY2Uta2V5"}, 401, ""},
		{"bearer", map[string]string{"Authorization": "Bearer alice-key"}, 200, "alice"},
		{"x-api-key", map[string]string{"X-Api-Key": "alice-key"}, 200, "alice"},
		{"stored as a hash", map[string]string{"Authorization": "bearer bob-key"}, 200, "bob"},
		{"forged caller dropped", map[string]string{"Authorization": "Bearer bob-key", "x_modelplane_CALLER": "alice", "X-Modelplane-Caller": "alice"}, 200, "bob"},
	}
	for _, c := range cases {
		next.header = nil
		rec := call(h, c.headers)
		if rec.Code != c.status {
			t.Fatalf("%s: status %d, want %d", c.name, rec.Code, c.status)
		}
		if c.status == 401 {
			if next.header != nil || rec.Header().Get("WWW-Authenticate") == "" {
				t.Fatalf("%s: reached the engine or no WWW-Authenticate", c.name)
			}
			errorCode(t, rec)
			continue
		}
		if got := next.header.Values("X-Modelplane-Caller"); len(got) != 1 || got[0] != c.caller {
			t.Fatalf("%s: caller header %v, want %s", c.name, got, c.caller)
		}
		for k := range next.header {
			if n := normalizeHeader(k); n == "authorization" || n == "x-api-key" || (n == "x-modelplane-caller" && k != "X-Modelplane-Caller") {
				t.Fatalf("%s: %s reached the engine", c.name, k)
			}
		}
	}
}

func TestRotationTakesEffectOnTheNextRequest(t *testing.T) {
	h, _ := setup(t, &Config{}, map[string]string{"alice": "alice-key"})
	dir := h.(*Auth).keys.dir
	if call(h, map[string]string{"Authorization": "Bearer alice-key"}).Code != 200 {
		t.Fatal("alice refused")
	}
	if err := os.Remove(filepath.Join(dir, "alice")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "carol"), []byte("carol-key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if rec := call(h, map[string]string{"Authorization": "Bearer alice-key"}); rec.Code != 401 {
		t.Fatalf("revoked key: %d", rec.Code)
	}
	if rec := call(h, map[string]string{"Authorization": "Bearer carol-key"}); rec.Code != 200 {
		t.Fatalf("added key: %d", rec.Code)
	}
}

func TestSharedKeysBadFilesAndMissingDirectoryAuthenticateNobody(t *testing.T) {
	h, _ := setup(t, &Config{}, map[string]string{"a": "same", "b": "same", "bad name": "x", "empty": " \n", "short": "sha256:abc"})
	for _, key := range []string{"same", "x", "sha256:abc", "abc"} {
		if rec := call(h, map[string]string{"Authorization": "Bearer " + key}); rec.Code != 401 {
			t.Fatalf("key %q: %d", key, rec.Code)
		}
	}
	gone, _ := setup(t, &Config{}, map[string]string{"alice": "alice-key"})
	os.RemoveAll(gone.(*Auth).keys.dir)
	if rec := call(gone, map[string]string{"Authorization": "Bearer alice-key"}); rec.Code != 401 {
		t.Fatalf("missing directory: %d", rec.Code)
	}
}

func TestAllowedCallersAndLimits(t *testing.T) {
	states = map[string]*callerState{}
	h, _ := setup(t, &Config{Allowed: []string{"alice"}, Service: "ml/chat", RequestsPerMinute: 60, Burst: 2},
		map[string]string{"alice": "alice-key", "bob": "bob-key"})
	if rec := call(h, map[string]string{"Authorization": "Bearer bob-key"}); rec.Code != 403 || errorCode(t, rec) != "caller_not_allowed" {
		t.Fatalf("bob: %d", rec.Code)
	}
	for i := 0; i < 2; i++ {
		if rec := call(h, map[string]string{"Authorization": "Bearer alice-key"}); rec.Code != 200 {
			t.Fatalf("alice %d: %d", i, rec.Code)
		}
	}
	rec := call(h, map[string]string{"Authorization": "Bearer alice-key"})
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("over the rate: %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
}

func TestInFlightLimitCountsRequestsUntilTheyEnd(t *testing.T) {
	states = map[string]*callerState{}
	l := newLimits(0, 0, 1)
	if _, why := l.admit("alice"); why != "" {
		t.Fatal("first request refused")
	}
	if wait, why := l.admit("alice"); wait != 1 || why != "in-flight request" {
		t.Fatalf("second request admitted while the first is in flight: %d %q", wait, why)
	}
	l.release("alice")
	if _, why := l.admit("alice"); why != "" {
		t.Fatal("refused after the first ended")
	}
}

func TestEverySpellingOfTheCallerHeaderIsKnown(t *testing.T) {
	got := spellings("x-modelplane-caller")
	want := []string{"X-Modelplane-Caller", "X-Modelplane_caller", "X_modelplane-Caller", "X_modelplane_caller"}
	if len(got) != len(want) {
		t.Fatalf("%v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%v, want %v", got, want)
		}
	}
}
