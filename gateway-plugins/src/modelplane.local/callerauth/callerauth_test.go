package callerauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
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

// fakeClock replaces the package clock for one test; advance moves it on.
func fakeClock(t *testing.T) func(time.Duration) {
	t.Helper()
	at := time.Unix(1_800_000_000, 0)
	clock = func() time.Time { return at }
	t.Cleanup(func() { clock = time.Now })
	return func(d time.Duration) { at = at.Add(d) }
}

func callFrom(h http.Handler, source string, headers map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	req.RemoteAddr = source
	for k, v := range headers {
		req.Header.Add(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// Issue 30 (low): 200 wrong keys from one source were 200 answers of 401, each a lookup.
func TestWrongKeysAreThrottledPerSource(t *testing.T) {
	advance := fakeClock(t)
	sources = map[string]*bucket{}
	h, _ := setup(t, &Config{FailuresPerMinute: 60, FailureBurst: 5}, map[string]string{"alice": "alice-key"})
	codes := map[int]int{}
	for i := 0; i < 200; i++ {
		codes[callFrom(h, "203.0.113.7:4000", map[string]string{"Authorization": "Bearer guess"}).Code]++
	}
	if codes[401] != 5 || codes[429] != 195 {
		t.Fatalf("one source's 200 wrong keys: %v, want 5 x 401 then 429", codes)
	}
	rec := callFrom(h, "203.0.113.7:4001", map[string]string{"Authorization": "Bearer alice-key"})
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "1" || errorCode(t, rec) != "too_many_failed_attempts" {
		t.Fatalf("a throttled source is refused before its key is looked at: %d %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	if rec := callFrom(h, "198.51.100.2:4000", map[string]string{"Authorization": "Bearer alice-key"}); rec.Code != 200 {
		t.Fatalf("another source is not slowed: %d", rec.Code)
	}
	if rec := callFrom(h, "198.51.100.2:4000", map[string]string{"Authorization": "Bearer guess"}); rec.Code != 401 {
		t.Fatalf("another source's first wrong key: %d", rec.Code)
	}
	advance(time.Second) // one failure's worth back
	if rec := callFrom(h, "203.0.113.7:4002", map[string]string{"Authorization": "Bearer alice-key"}); rec.Code != 200 {
		t.Fatalf("the source after a second: %d", rec.Code)
	}
	off, _ := setup(t, &Config{}, map[string]string{"alice": "alice-key"})
	for i := 0; i < 50; i++ {
		if rec := callFrom(off, "203.0.113.7:4000", nil); rec.Code != 401 {
			t.Fatalf("failuresPerMinute 0 turns the bound off: %d", rec.Code)
		}
	}
	if c := CreateConfig(); c.FailuresPerMinute == 0 || c.FailureBurst == 0 {
		t.Fatalf("the bound is on by default: %+v", c)
	}
}

func TestTheSourceTableStaysBounded(t *testing.T) {
	fakeClock(t)
	sources = map[string]*bucket{}
	f := newFailures(60, 1)
	for i := 0; i < maxSources+10; i++ {
		f.failed(net.IPv4(10, byte(i>>16), byte(i>>8), byte(i)).String())
	}
	if len(sources) > maxSources {
		t.Fatalf("%d sources tracked, at most %d", len(sources), maxSources)
	}
}

// Issue 30 (low): a caller's key file overwritten in place (same directory entry, and here even
// the same size and modification time) was never noticed: the directory's stamp did not change.
func TestAKeyFileOverwrittenInPlaceIsNoticed(t *testing.T) {
	advance := fakeClock(t)
	h, _ := setup(t, &Config{}, map[string]string{"alice": "alice-key-1"})
	path := filepath.Join(h.(*Auth).keys.dir, "alice")
	if call(h, map[string]string{"Authorization": "Bearer alice-key-1"}).Code != 200 {
		t.Fatal("alice refused")
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("alice-key-2"), 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Chtimes(path, info.ModTime(), info.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Dir(path), dir.ModTime(), dir.ModTime()); err != nil {
		t.Fatal(err)
	}
	advance(recheckMin + time.Millisecond)
	if rec := call(h, map[string]string{"Authorization": "Bearer alice-key-1"}); rec.Code != 401 {
		t.Fatalf("the old key after the overwrite: %d", rec.Code)
	}
	if rec := call(h, map[string]string{"Authorization": "Bearer alice-key-2"}); rec.Code != 200 {
		t.Fatalf("the new key after the overwrite: %d", rec.Code)
	}
}
