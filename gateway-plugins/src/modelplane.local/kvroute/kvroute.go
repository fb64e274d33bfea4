// Package kvroute is a Traefik middleware (a local plugin, interpreted by Traefik's Yaegi) for a
// workload gateway: it picks the replica of a request by prefix overlap minus load, the score of
// modelplane/kvroute/routers.py's best_replica, and proxies the request to it. It also answers
// GET SummaryPath with the summary of the blocks its replicas hold, in the format
// modelplane/kvroute/summary.py reads (a 65,536-bit Bloom filter, three 16-bit slices of
// splitmix64's finalizer of each block id).
//
// A request names its prompt's blocks in its JSON body: `kv_block_hashes` (block ids) and
// `prompt_tokens` (the mock engine's extension; a real deployment would hash the tokens). The
// index of what each replica holds is the gateway's own: the blocks it sent there, in an LRU of
// KVBlocks per replica, as the engine evicts them (llm-d's approximate prefix scorer). The load
// is the prefill time the gateway expects of what it sent and has not been answered yet.
//
// With Clusters set, the same plugin is the control plane's hop instead (cluster.go): it picks the
// cluster over the summaries the workload gateways serve and forwards the request there.
//
// Tested under real Traefik (tests/unit/kvroute/test_kvroute_traefik.py). The generated gateway
// configuration loads it for a ModelService with `routingPolicy.balancing: CacheAware`
// (modelplane/gateway/kvroute.py builds both modes' configuration).
package kvroute

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"path"
	"strings"
	"sync"
)

// clusterSummaryPath is where a workload gateway answers its summary, below the service's prefix
// (modelplane/gateway/kvroute.py SUMMARY_PATH), and what the control plane reads there.
const clusterSummaryPath = "/kvroute/summary"

const (
	maxBody        = 1 << 20
	maxBlocks      = 8192
	defaultBlocks  = 860
	defaultTokens  = 512
	defaultPrefill = 45e-6
	defaultDecode  = 7.5e-3
)

// Config is the middleware's dynamic configuration.
type Config struct {
	Replicas          []string `json:"replicas,omitempty"`
	KVBlocks          int      `json:"kvBlocks,omitempty"`
	BlockTokens       int      `json:"blockTokens,omitempty"`
	PrefillUsPerToken float64  `json:"prefillUsPerToken,omitempty"`
	DecodeMsPerToken  float64  `json:"decodeMsPerToken,omitempty"`
	Cluster           string   `json:"cluster,omitempty"`
	SummaryPath       string   `json:"summaryPath,omitempty"`
	// The control plane's mode (cluster.go): the clusters, and how often each one's summary is read
	// again (0: before every request).
	Clusters         []ClusterConfig `json:"clusters,omitempty"`
	TLS              *TLSConfig      `json:"tls,omitempty"`
	SummaryIntervalS float64         `json:"summaryIntervalS,omitempty"`
	ShareWindow      int             `json:"shareWindow,omitempty"`
	ShareSlack       float64         `json:"shareSlack,omitempty"`
	LoadBound        float64         `json:"loadBound,omitempty"`
	LoadFloorS       float64         `json:"loadFloorS,omitempty"`
}

// CreateConfig returns the defaults Traefik decodes the configuration into.
func CreateConfig() *Config {
	return &Config{KVBlocks: defaultBlocks, BlockTokens: defaultTokens, PrefillUsPerToken: defaultPrefill * 1e6,
		DecodeMsPerToken: defaultDecode * 1e3, SummaryPath: clusterSummaryPath, SummaryIntervalS: 1,
		ShareWindow: 5000, ShareSlack: 0.004, LoadBound: 0.25, LoadFloorS: 0.5}
}

type replica struct {
	target  *url.URL
	proxy   *httputil.ReverseProxy
	index   *lru
	backlog float64 // seconds of prefill expected of requests sent and not answered
}

// Router is one configured instance.
type Router struct {
	mu          sync.Mutex
	replicas    []*replica
	blockTokens int
	prefill     float64
	decode      float64
	cluster     string
	summaryPath string
	filter      *countingFilter
	seq         int64
	cp          *clusterRouter // the control plane's mode; nil at a workload gateway
}

// New builds the middleware; Traefik calls it for every configuration it loads.
func New(_ context.Context, _ http.Handler, config *Config, _ string) (http.Handler, error) {
	if len(config.Clusters) > 0 {
		return newClusterRouter(config)
	}
	if len(config.Replicas) == 0 {
		return nil, errors.New("kvroute: replicas (a workload gateway) or clusters (the control plane) is required")
	}
	if config.KVBlocks < 1 || config.BlockTokens < 1 || !(config.PrefillUsPerToken > 0) ||
		!(config.DecodeMsPerToken > 0) {
		return nil, errors.New("kvroute: kvBlocks, blockTokens, prefillUsPerToken and decodeMsPerToken must be positive")
	}
	r := &Router{blockTokens: config.BlockTokens, prefill: config.PrefillUsPerToken / 1e6,
		decode: config.DecodeMsPerToken / 1e3, cluster: config.Cluster, summaryPath: config.SummaryPath,
		filter: newCountingFilter()}
	for _, raw := range config.Replicas {
		u, err := url.Parse(raw)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, errors.New("kvroute: replicas must be absolute URLs")
		}
		proxy := httputil.NewSingleHostReverseProxy(u)
		// A closure, not a method value (Yaegi types a method value with its receiver).
		proxy.ErrorHandler = func(rw http.ResponseWriter, req *http.Request, err error) { unreached(rw, req, err) }
		r.replicas = append(r.replicas, &replica{target: u, proxy: proxy,
			index: newLRU(config.KVBlocks, r.filter.add, r.filter.remove)})
	}
	return r, nil
}

type kvBody struct {
	Blocks       []json.Number `json:"kv_block_hashes"`
	PromptTokens json.Number   `json:"prompt_tokens"`
}

// blocksOf reads the request's blocks from its body (at most maxBody bytes, given back to the request
// whatever happens); nil blocks when the body names none or is not what kvroute reads.
func blocksOf(req *http.Request) ([]uint64, int64, error) {
	if req.Body == nil || req.Method != http.MethodPost {
		return nil, 0, nil
	}
	data, err := io.ReadAll(io.LimitReader(req.Body, maxBody+1))
	if err != nil {
		return nil, 0, err
	}
	if len(data) > maxBody {
		return nil, 0, errors.New("body too large")
	}
	req.Body = io.NopCloser(bytes.NewReader(data))
	req.ContentLength = int64(len(data))
	var body kvBody
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if dec.Decode(&body) != nil || len(body.Blocks) > maxBlocks {
		return nil, 0, nil
	}
	tokens, err := body.PromptTokens.Int64()
	if err != nil || tokens < 1 {
		return nil, 0, nil
	}
	blocks := make([]uint64, 0, len(body.Blocks))
	for _, n := range body.Blocks {
		v, err := n.Int64()
		if err != nil || v < 0 {
			return nil, 0, nil
		}
		blocks = append(blocks, uint64(v))
	}
	return blocks, tokens, nil
}

func hitTokens(matched int, tokens int64, blockTokens int) int64 {
	hit := int64(matched) * int64(blockTokens)
	if hit > tokens-1 {
		hit = tokens - 1
	}
	if hit < 0 {
		return 0
	}
	return hit
}

// pick is best_replica over the replicas not yet tried: the least backlog plus prefill of what the replica
// lacks (a tie over a prompt the replica holds none of: the fewer blocks held; then the first); it holds the
// request's blocks there and adds its prefill to the backlog (done() takes it off).
func (r *Router) pick(blocks []uint64, tokens int64, tried map[*replica]bool) (*replica, float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var best *replica
	bestScore, bestWork, bestHeld := 0.0, 0.0, 0
	for _, rep := range r.replicas {
		if tried[rep] {
			continue
		}
		matched := rep.index.prefix(blocks)
		work := float64(tokens-hitTokens(matched, tokens, r.blockTokens))*r.prefill + r.decode
		score := rep.backlog + work
		// A prompt the replica holds none of: among equal scores, the replica holding fewer blocks;
		// any other tie to the first (as best_replica).
		held := 0
		if matched == 0 {
			held = rep.index.order.Len()
		}
		if best == nil || score < bestScore || (score == bestScore && held < bestHeld) {
			best, bestScore, bestWork, bestHeld = rep, score, work, held
		}
	}
	best.index.touch(blocks)
	best.backlog += bestWork
	return best, bestWork
}

func (r *Router) done(rep *replica, work float64) {
	r.mu.Lock()
	rep.backlog -= work
	if rep.backlog < 0 {
		rep.backlog = 0
	}
	r.mu.Unlock()
}

// forget empties the index of a replica that could not be reached: pick held the request's blocks
// there, and an engine that is gone or restarting holds none of what it was sent before either, so
// neither this cluster's routing nor the summary it publishes counts them as cached.
func (r *Router) forget(rep *replica) {
	r.mu.Lock()
	rep.index.clear()
	r.mu.Unlock()
}

func (r *Router) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	if r.cp != nil && path.Clean(req.URL.Path) == clusterSummaryPath {
		// A caller must not read a cluster's summary (what its replicas hold) through the control
		// plane: not forwarded, whatever the method or spelling of the path.
		http.NotFound(rw, req)
		return
	}
	if req.Method == http.MethodGet && r.summaryPath != "" && req.URL.Path == r.summaryPath {
		r.serveSummary(rw)
		return
	}
	blocks, tokens, err := blocksOf(req)
	if err != nil {
		http.Error(rw, "request body too large or unreadable", http.StatusRequestEntityTooLarge)
		return
	}
	if tokens == 0 {
		tokens = 1 // no blocks named: the least loaded replica (nothing is held to overlap)
	}
	if r.cp != nil {
		r.serveCluster(rw, req, blocks, tokens)
		return
	}
	r.serveReplica(rw, req, blocks, tokens)
}

// attemptKey marks a request the plugin may send on to another replica: the proxy's error handler
// records that the replica was not reached instead of answering.
type attemptKey struct{}

type attempt struct{ unreached bool }

// unreached is every replica proxy's error handler. The reverse proxy calls it when the replica could
// not be reached or gave no response (nothing written to the caller yet), never once a response streams.
func unreached(rw http.ResponseWriter, req *http.Request, _ error) {
	if a, ok := req.Context().Value(attemptKey{}).(*attempt); ok {
		a.unreached = true
		return
	}
	rw.WriteHeader(http.StatusBadGateway)
}

// serveReplica sends the request to the best replica, and to the next best while one cannot be reached
// (an engine gone or restarting), as Traefik's retry does for the round robin; the body was read whole
// by blocksOf (1 MiB at most), so every attempt sends it again (a body that streams gets one attempt).
// None reached: 503, which the control plane takes as this cluster refusing and spills to another cluster.
func (r *Router) serveReplica(rw http.ResponseWriter, req *http.Request, blocks []uint64, tokens int64) {
	// blocksOf holds a POST's body in memory (1 MiB at most); any other request with a body streams
	// to one replica only, as it cannot be sent twice.
	var body []byte
	replayable := req.Method == http.MethodPost || req.Body == nil || req.Body == http.NoBody || req.ContentLength == 0
	if replayable && req.Body != nil {
		body, _ = io.ReadAll(req.Body)
	}
	tried := map[*replica]bool{}
	for {
		rep, work := r.pick(blocks, tokens, tried)
		tried[rep] = true
		a := &attempt{}
		out := req.WithContext(context.WithValue(req.Context(), attemptKey{}, a))
		if replayable {
			out.Body = io.NopCloser(bytes.NewReader(body))
		}
		rep.proxy.ServeHTTP(rw, out)
		r.done(rep, work)
		if !a.unreached {
			return
		}
		r.forget(rep)
		if req.Context().Err() != nil {
			return // the caller went away: no other replica is tried, nothing is answered
		}
		if !replayable || len(tried) == len(r.replicas) {
			break
		}
	}
	http.Error(rw, "no replica of this cluster could be reached", http.StatusServiceUnavailable)
}

type summaryJSON struct {
	Cluster     string  `json:"cluster"`
	Seq         int64   `json:"seq"`
	PublishedMs int64   `json:"published_ms"`
	Replicas    int     `json:"replicas"`
	LoadS       float64 `json:"load_s"`
	M           int     `json:"m"`
	K           int     `json:"k"`
	Bits        []byte  `json:"bits"` // encoding/json writes []byte as standard base64
}

func (r *Router) summary(nowMs int64) summaryJSON {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	load := 0.0
	for _, rep := range r.replicas {
		load += rep.backlog
	}
	bits := make([]byte, len(r.filter.bits))
	copy(bits, r.filter.bits)
	return summaryJSON{Cluster: r.cluster, Seq: r.seq, PublishedMs: nowMs, Replicas: len(r.replicas),
		LoadS: load / float64(len(r.replicas)), M: summaryBits, K: summaryHashes, Bits: bits}
}

func newClusterRouter(config *Config) (http.Handler, error) {
	if config.BlockTokens < 1 || !(config.PrefillUsPerToken > 0) || !(config.DecodeMsPerToken > 0) ||
		config.SummaryIntervalS < 0 || config.ShareWindow < 1 || config.ShareSlack < 0 || config.LoadBound < 0 ||
		config.LoadFloorS < 0 {
		return nil, errors.New("kvroute: blockTokens, prefillUsPerToken, decodeMsPerToken, shareWindow must be " +
			"positive; summaryIntervalS, shareSlack, loadBound, loadFloorS not negative")
	}
	cp := &clusterRouter{interval: config.SummaryIntervalS,
		windowSize: config.ShareWindow, slack: config.ShareSlack, loadBound: config.LoadBound,
		loadFloor: config.LoadFloorS, prefill: config.PrefillUsPerToken / 1e6, decode: config.DecodeMsPerToken / 1e3,
		blockTokens: config.BlockTokens, now: wallClock}
	for _, c := range config.Clusters {
		u, err := url.Parse(c.URL)
		if err != nil || u.Scheme == "" || u.Host == "" || c.Name == "" || !(c.Weight >= 0) {
			return nil, errors.New("kvroute: each cluster needs a name, an absolute url and a weight >= 0")
		}
		client, err := clientFor(config.TLS, c.ServerName)
		if err != nil {
			return nil, err
		}
		cp.clusters = append(cp.clusters, &summary{name: c.Name, url: strings.TrimRight(c.URL, "/"), weight: c.Weight,
			nameHashVal: nameHash(c.Name), client: client})
	}
	cp.counts = make([]int, len(cp.clusters))
	r := &Router{cp: cp, blockTokens: config.BlockTokens}
	cp.mu = &r.mu
	return r, nil
}
