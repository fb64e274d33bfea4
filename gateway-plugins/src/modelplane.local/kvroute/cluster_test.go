package kvroute

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// The values routers.py's _name_hash, prefix_key and rendezvous_score give (printed by Python).
func TestRendezvousMatchesThePythonRouter(t *testing.T) {
	for name, want := range map[string]uint64{"c0": 6989523594863587744, "eu-west": 11894221577902147342,
		"a-very-long-cluster-name": 90961490218789548} {
		if got := nameHash(name); got != want {
			t.Errorf("nameHash(%q) = %d, want %d", name, got, want)
		}
	}
	key := prefixKey([]uint64{0, 7, 9})
	if key != 10300703229546809107 {
		t.Fatalf("prefixKey = %d", key)
	}
	c := &summary{name: "c1", weight: 0.3, nameHashVal: nameHash("c1")}
	if got := rendezvousScore(key, c); got != 0.18145021870306413 {
		t.Fatalf("rendezvousScore = %v", got)
	}
}

func summaryBytes(t *testing.T, over map[string]any) []byte {
	t.Helper()
	f := newCountingFilter()
	f.add(1)
	obj := map[string]any{"cluster": "c0", "seq": 5, "published_ms": 1000, "replicas": 2, "load_s": 0.5,
		"m": summaryBits, "k": summaryHashes, "bits": base64.StdEncoding.EncodeToString(f.bits)}
	for k, v := range over {
		if v == nil {
			delete(obj, k)
		} else {
			obj[k] = v
		}
	}
	data, _ := json.Marshal(obj)
	return data
}

func TestHostileSummariesAreRefused(t *testing.T) {
	full := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\xff", summaryBits/8)))
	cases := map[string][]byte{
		"forged name":   summaryBytes(t, map[string]any{"cluster": "c9"}),
		"negative":      summaryBytes(t, map[string]any{"load_s": -1}),
		"absurd":        summaryBytes(t, map[string]any{"load_s": 1e300}),
		"bool":          summaryBytes(t, map[string]any{"seq": true}),
		"future":        summaryBytes(t, map[string]any{"published_ms": 60000}),
		"saturated":     summaryBytes(t, map[string]any{"bits": full}),
		"short bits":    summaryBytes(t, map[string]any{"bits": "AAAA"}),
		"missing":       summaryBytes(t, map[string]any{"k": nil}),
		"extra":         summaryBytes(t, map[string]any{"x": 1}),
		"NaN":           []byte(strings.Replace(string(summaryBytes(t, nil)), `"load_s":0.5`, `"load_s":NaN`, 1)),
		"huge":          []byte(strings.Repeat(" ", maxSummaryBytes+1)),
		"not an object": []byte(`[1,2]`),
	}
	for why, data := range cases {
		c := &summary{name: "c0"}
		if err := decodeSummary(data, c, 10); err == nil {
			t.Errorf("%s: accepted", why)
		}
	}
	c := &summary{name: "c0"}
	if err := decodeSummary(summaryBytes(t, nil), c, 10); err != nil || c.seq != 5 || c.replicas != 2 {
		t.Fatalf("a good summary: %v %+v", err, c)
	}
	if err := decodeSummary(summaryBytes(t, nil), c, 10); err == nil {
		t.Fatal("a replayed summary (the same seq) was accepted")
	}
}

func testRouter(weights ...float64) *clusterRouter {
	now := 100.0
	cr := &clusterRouter{mu: &sync.Mutex{}, windowSize: 5000, slack: 0.004, loadBound: 0.25, loadFloor: 0.5, prefill: 45e-6,
		decode: 7.5e-3, blockTokens: 512, interval: 1e9, now: func() float64 { return now }}
	for i, w := range weights {
		name := string(rune('a' + i))
		cr.clusters = append(cr.clusters, &summary{name: name, weight: w, nameHashVal: nameHash(name),
			hasSummary: true, fetchedAtS: now, publishedS: now, replicas: 2, bits: make([]byte, summaryBits/8)})
	}
	cr.counts = make([]int, len(weights))
	return cr
}

func TestAKnownPrefixGoesWhereItIsHeld(t *testing.T) {
	cr := testRouter(1, 1, 1)
	f := newCountingFilter()
	for _, b := range []uint64{0, 5, 6} {
		f.add(b)
	}
	cr.clusters[2].bits = f.bits
	if got := cr.choose([]uint64{0, 5, 6, 7}, 4*512, map[int]bool{}); got != 2 {
		t.Fatalf("went to %d, the prefix is held by 2", got)
	}
}

func TestNewPrefixesFollowTheWeightsAndRefusalsSpill(t *testing.T) {
	cr := testRouter(9, 1)
	counts := [2]int{}
	for i := 0; i < 10000; i++ {
		counts[cr.choose([]uint64{uint64(1000 + 2*i), uint64(1001 + 2*i)}, 1024, map[int]bool{})]++
	}
	if share := float64(counts[1]) / 10000; share < 0.09 || share > 0.11 {
		t.Fatalf("the 10%% cluster took %.1f%%", share*100)
	}
	cr.refused(0, 503)
	if got := cr.choose([]uint64{1, 2}, 1024, map[int]bool{}); got != 1 {
		t.Fatalf("a cluster that refused was chosen")
	}
	if got := cr.choose([]uint64{1, 2}, 1024, map[int]bool{0: true, 1: true}); got != -1 {
		t.Fatalf("every cluster excluded, still chose %d", got)
	}
}

func TestARefusingClusterSpillsWithNothingFailed(t *testing.T) {
	for _, refusal := range []int{503, 429, 0} { // 0: the cluster's gateway is gone (connection refused)
		lost := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
			if req.URL.Path == "/kvroute/summary" {
				rw.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			rw.WriteHeader(refusal)
		}))
		lostURL := lost.URL
		if refusal == 0 {
			lost.Close()
		} else {
			defer lost.Close()
		}
		good := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
			_, _ = rw.Write([]byte("ok"))
		}))
		defer good.Close()
		cfg := CreateConfig()
		cfg.SummaryIntervalS = 0
		cfg.Clusters = []ClusterConfig{{Name: "a", URL: lostURL, Weight: 1}, {Name: "b", URL: good.URL, Weight: 1}}
		h, err := New(context.Background(), nil, cfg, "cp")
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 50; i++ {
			body, _ := json.Marshal(map[string]any{"kv_block_hashes": []int{10 * i, 10*i + 1}, "prompt_tokens": 1000})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body)))
			if rec.Code != http.StatusOK || rec.Header().Get("X-Modelplane-Cluster") != "b" {
				t.Fatalf("refusal %d, request %d: status %d from %q", refusal, i, rec.Code,
					rec.Header().Get("X-Modelplane-Cluster"))
			}
		}
	}
}

func TestACallerReadsNoSummaryThroughTheControlPlane(t *testing.T) {
	forwarded := 0 // the caller's requests the cluster's gateway saw (not the control plane's own reads)
	gw := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		if req.Header.Get("X-Caller") != "" {
			forwarded++
		}
		_, _ = rw.Write([]byte(`{"cluster":"a"}`))
	}))
	defer gw.Close()
	cfg := CreateConfig()
	cfg.SummaryIntervalS = 0
	cfg.Clusters = []ClusterConfig{{Name: "a", URL: gw.URL, Weight: 1}}
	h, err := New(context.Background(), nil, cfg, "cp")
	if err != nil {
		t.Fatal(err)
	}
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodHead} {
		for _, target := range []string{"/kvroute/summary", "/kvroute/summary/", "/./kvroute//summary?x=1",
			"/kvroute%2Fsummary"} {
			rec := httptest.NewRecorder()
			caller := httptest.NewRequest(method, target, nil)
			caller.Header.Set("X-Caller", "1")
			h.ServeHTTP(rec, caller)
			if rec.Code != http.StatusNotFound || forwarded != 0 {
				t.Fatalf("%s %s: status %d, %d forwarded to a cluster", method, target, rec.Code, forwarded)
			}
		}
	}
	rec := httptest.NewRecorder()
	completion := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader([]byte(`{}`)))
	completion.Header.Set("X-Caller", "1")
	h.ServeHTTP(rec, completion)
	if rec.Code != http.StatusOK || forwarded != 1 {
		t.Fatalf("a completion: status %d, %d forwarded", rec.Code, forwarded)
	}
}
