package kvroute

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// The same values modelplane.kvroute.summary.mix64 and positions give (printed by Python).
func TestMixAndPositionsMatchThePythonSummary(t *testing.T) {
	cases := []struct {
		block uint64
		mix   uint64
		pos   [3]int
	}{
		{0, 16294208416658607535, [3]int{52655, 31517, 43065}},
		{1, 10451216379200822465, [3]int{23745, 35074, 11756}},
		{12345, 2454886589211414944, [3]int{4512, 43473, 33368}},
		{9223372036854775807, 3055647633038352039, [3]int{40615, 11779, 55125}},
	}
	for _, c := range cases {
		if got := mix64(c.block); got != c.mix {
			t.Errorf("mix64(%d) = %d, want %d", c.block, got, c.mix)
		}
		if got := positions(c.block); got != c.pos {
			t.Errorf("positions(%d) = %v, want %v", c.block, got, c.pos)
		}
	}
}

type engines struct {
	mu     sync.Mutex
	served map[string]int
}

func backends(t *testing.T, n int) ([]string, *engines) {
	t.Helper()
	seen := &engines{served: map[string]int{}}
	var urls []string
	for i := 0; i < n; i++ {
		name := string(rune('a' + i))
		srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
			seen.mu.Lock()
			seen.served[name]++
			seen.mu.Unlock()
			rw.Header().Set("X-Served-By", name)
			_, _ = rw.Write([]byte("ok"))
		}))
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	return urls, seen
}

func newRouter(t *testing.T, urls []string, blocks int) *Router {
	t.Helper()
	cfg := CreateConfig()
	cfg.Replicas = urls
	cfg.KVBlocks = blocks
	cfg.Cluster = "c0"
	h, err := New(context.Background(), nil, cfg, "kv")
	if err != nil {
		t.Fatal(err)
	}
	return h.(*Router)
}

func send(t *testing.T, r *Router, blocks []uint64, tokens int) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"kv_block_hashes": blocks, "prompt_tokens": tokens, "max_tokens": 1})
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body.String())
	}
	return rec.Header().Get("X-Served-By")
}

func TestAKnownPrefixGoesToTheReplicaHoldingIt(t *testing.T) {
	urls, _ := backends(t, 4)
	r := newRouter(t, urls, 100)
	first := send(t, r, []uint64{0, 11, 12, 13}, 4*512)
	for i := uint64(0); i < 6; i++ { // other conversations spread over the replicas
		send(t, r, []uint64{0, 100 + 3*i, 101 + 3*i}, 3*512)
	}
	if again := send(t, r, []uint64{0, 11, 12, 13, 14}, 5*512); again != first {
		t.Fatalf("the second turn went to %s, its prefix is on %s", again, first)
	}
}

func TestLoadOutweighsASmallOverlap(t *testing.T) {
	urls, _ := backends(t, 2)
	r := newRouter(t, urls, 100)
	r.replicas[0].index.touch([]uint64{0})
	r.replicas[0].backlog = 10 // seconds: far more than one block's prefill
	rep, _ := r.pick([]uint64{0, 1}, 2*512, nil)
	if rep != r.replicas[1] {
		t.Fatal("a replica 10 s behind was picked for a one-block overlap")
	}
}

func TestEvictionFollowsTheEnginesLRU(t *testing.T) {
	l := newLRU(2, func(uint64) {}, func(uint64) {})
	l.touch([]uint64{1, 2})
	l.touch([]uint64{1})
	l.touch([]uint64{3})
	if l.prefix([]uint64{1, 3}) != 2 || l.prefix([]uint64{2}) != 0 {
		t.Fatal("block 2, the least recently used, should have gone")
	}
}

func TestBodiesKvrouteCannotReadStillReachAReplicaWhole(t *testing.T) {
	urls, seen := backends(t, 2)
	r := newRouter(t, urls, 10)
	for _, body := range []string{`not json`, `{"kv_block_hashes": [1.5], "prompt_tokens": 10}`,
		`{"kv_block_hashes": [-1], "prompt_tokens": 10}`, `{"kv_block_hashes": [1], "prompt_tokens": NaN}`,
		`{"kv_block_hashes": "x"}`, strings.Repeat("[", 100000)} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
		if rec.Code != http.StatusOK {
			t.Fatalf("%.20q: status %d", body, rec.Code)
		}
	}
	total := 0
	for _, n := range seen.served {
		total += n
	}
	if total != 6 {
		t.Fatalf("served %d of 6", total)
	}
}

func TestAHugeBodyIsRefused(t *testing.T) {
	urls, _ := backends(t, 1)
	r := newRouter(t, urls, 10)
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
		bytes.NewReader(make([]byte, maxBody+1))))
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d", rec.Code)
	}
}

func TestSummaryHoldsTheSentBlocksInThePythonFormat(t *testing.T) {
	urls, _ := backends(t, 2)
	r := newRouter(t, urls, 2)
	send(t, r, []uint64{7, 8, 9}, 3*512) // capacity 2: block 7 is evicted again
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/kvroute/summary", nil))
	var s map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"cluster", "seq", "published_ms", "replicas", "load_s", "m", "k", "bits"} {
		if _, ok := s[k]; !ok {
			t.Fatalf("summary lacks %s: %v", k, s)
		}
	}
	bits, err := base64.StdEncoding.DecodeString(s["bits"].(string))
	if err != nil || len(bits) != summaryBits/8 {
		t.Fatalf("bits: %v, %d bytes", err, len(bits))
	}
	has := func(b uint64) bool {
		for _, p := range positions(b) {
			if bits[p>>3]&(1<<(p&7)) == 0 {
				return false
			}
		}
		return true
	}
	if !has(8) || !has(9) || has(7) {
		t.Fatal("the summary should hold blocks 8 and 9 and not the evicted 7")
	}
}

func TestConfigIsChecked(t *testing.T) {
	for _, cfg := range []*Config{{}, {Replicas: []string{"not a url"}, KVBlocks: 1, BlockTokens: 1,
		PrefillUsPerToken: 1, DecodeMsPerToken: 1}, {Replicas: []string{"http://x"}, KVBlocks: 0}} {
		if _, err := New(context.Background(), nil, cfg, "kv"); err == nil {
			t.Fatalf("accepted %+v", cfg)
		}
	}
}

// deadURL is the address of a server that is closed: connection refused, as an engine gone.
func deadURL(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.URL
}

func TestAnUnreachableReplicaIsSkippedAndTheNextGetsTheWholeBody(t *testing.T) {
	var got []string
	var mu sync.Mutex
	live := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		data, _ := io.ReadAll(req.Body)
		mu.Lock()
		got = append(got, string(data))
		mu.Unlock()
		rw.Header().Set("X-Served-By", "live")
		_, _ = rw.Write([]byte("ok"))
	}))
	defer live.Close()
	// the dead replica listed first: it wins the ties, so requests try it before the live one
	r := newRouter(t, []string{deadURL(t), live.URL}, 10)
	var sent []string
	for i := 0; i < 20; i++ {
		body, _ := json.Marshal(map[string]any{"kv_block_hashes": []int{100 * i, 100*i + 1}, "prompt_tokens": 1000})
		sent = append(sent, string(body))
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body)))
		if rec.Code != http.StatusOK || rec.Header().Get("X-Served-By") != "live" {
			t.Fatalf("request %d: status %d from %q", i, rec.Code, rec.Header().Get("X-Served-By"))
		}
	}
	if strings.Join(got, "\n") != strings.Join(sent, "\n") {
		t.Fatalf("the live replica got other bodies than were sent:\n%v\n%v", got, sent)
	}
	for i, rep := range r.replicas {
		if rep.backlog != 0 {
			t.Fatalf("replica %d keeps a backlog of %g s after every request was answered", i, rep.backlog)
		}
	}
}

func TestNoReplicaReachedIsA503TheControlPlaneSpillsOn(t *testing.T) {
	r := newRouter(t, []string{deadURL(t), deadURL(t)}, 10)
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(method, "/v1/chat/completions", strings.NewReader(`{}`)))
		if rec.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s: status %d, want 503", method, rec.Code)
		}
	}
}

func TestAReplicaThatWasNotReachedHoldsNoBlocks(t *testing.T) {
	live := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		_, _ = rw.Write([]byte("ok"))
	}))
	defer live.Close()
	r := newRouter(t, []string{deadURL(t), live.URL}, 10)
	// the dead replica holds a prefix from before it went away; the request naming it fails over
	r.replicas[0].index.touch([]uint64{7, 8})
	body := `{"kv_block_hashes": [7, 8, 9], "prompt_tokens": 1500}`
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	if held := r.replicas[0].index.order.Len(); held != 0 {
		t.Fatalf("the unreached replica still holds %d blocks", held)
	}
	if got := r.replicas[1].index.prefix([]uint64{7, 8, 9}); got != 3 {
		t.Fatalf("the replica that answered holds %d of the 3 blocks", got)
	}
	// the published summary counts the blocks once, for the replica that holds them
	once := newCountingFilter()
	for _, b := range []uint64{7, 8, 9} {
		once.add(b)
	}
	for _, b := range []uint64{7, 8, 9} {
		for _, pos := range positions(b) {
			if r.filter.counts[pos] != once.counts[pos] {
				t.Fatalf("block %d: the summary counts %d holders at bit %d, want %d", b, r.filter.counts[pos], pos,
					once.counts[pos])
			}
		}
	}
}
