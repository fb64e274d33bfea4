package kvroute

// The control plane's mode (Config.Clusters set): pick the cluster of a request over the summaries
// each cluster's workload gateway serves, as modelplane/kvroute/routers.py's CacheAware.cluster_for
// does, within the clusters' weights, and forward the request to that cluster's gateway; a cluster
// that refuses (connection error, 503, 429) is kept out for a cooldown and the next one tried.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"math/bits"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

const (
	maxSummaryBytes = 16 * 1024
	maxAgeS         = 5.0
	maxSkewS        = 1.0
	maxFill         = 0.5
	lostCooldownS   = 10.0
	busyCooldownS   = 1.0
	keyBlocks       = 2
)

// ClusterConfig is one cluster of the ModelService: its workload gateway's base URL and its weight;
// with TLS, the name its gateway's certificate is verified for (default: the URL's host).
type ClusterConfig struct {
	Name       string  `json:"name,omitempty"`
	URL        string  `json:"url,omitempty"`
	Weight     float64 `json:"weight,omitempty"`
	ServerName string  `json:"serverName,omitempty"`
}

// TLSConfig is mutual TLS towards the workload gateways: the CA their certificates are verified
// against (only it, not the system's roots) and the client certificate presented to them (files).
type TLSConfig struct {
	CAFile   string `json:"caFile,omitempty"`
	CertFile string `json:"certFile,omitempty"`
	KeyFile  string `json:"keyFile,omitempty"`
}

const (
	dialTimeout    = 30 * time.Second
	summaryTimeout = 5 * time.Second
)

// clientFor is the HTTP client one cluster is dialled with: plain, or mutual TLS with the hop CA
// and the client certificate, the gateway's certificate verified for serverName. Like Traefik's own
// proxy it puts no bound on a whole request (a completion may stream for as long as the ModelService's
// timeouts allow); only dialling is bounded here, and a summary read by summaryTimeout (fetch).
func clientFor(t *TLSConfig, serverName string) (*http.Client, error) {
	dialer := &net.Dialer{Timeout: dialTimeout}
	// A closure, not the method value dialer.DialContext, which Yaegi types as taking the receiver.
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return dialer.DialContext(ctx, network, addr)
	}
	transport := &http.Transport{DialContext: dial, TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}
	if t == nil {
		return &http.Client{Transport: transport}, nil
	}
	if t.CAFile == "" || t.CertFile == "" || t.KeyFile == "" {
		return nil, errors.New("kvroute: tls needs caFile, certFile and keyFile")
	}
	ca, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, errors.New("kvroute: tls.caFile cannot be read")
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ca) {
		return nil, errors.New("kvroute: tls.caFile holds no PEM certificate")
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, errors.New("kvroute: tls.certFile and tls.keyFile are not a certificate and its key")
	}
	transport.TLSClientConfig = &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert},
		ServerName: serverName, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: transport}, nil
}

type summary struct {
	seq         int64
	publishedS  float64
	replicas    int
	loadS       float64
	bits        []byte
	hasSummary  bool
	fetchedAtS  float64
	downUntilS  float64
	sentSinceS  float64
	seenSeq     int64
	name        string
	url         string
	weight      float64
	nameHashVal uint64
	refreshing  bool
	client      *http.Client
}

type clusterRouter struct {
	mu          *sync.Mutex // the Router's: held while choosing, taken by a background refresh
	clusters    []*summary
	interval    float64
	window      []int
	counts      []int
	windowSize  int
	slack       float64
	loadBound   float64
	loadFloor   float64
	prefill     float64
	decode      float64
	blockTokens int
	now         func() float64
}

func nameHash(name string) uint64 {
	b := []byte(name)
	head := make([]byte, 8)
	copy(head, b)
	h := binary.LittleEndian.Uint64(head) ^ uint64(len(name))
	if len(b) > 8 {
		for _, ch := range b[8:] {
			h = mix64(h ^ uint64(ch))
		}
	}
	return mix64(h)
}

func prefixKey(blocks []uint64) uint64 {
	key := uint64(0x51ED270B)
	for i, b := range blocks {
		if i >= keyBlocks {
			break
		}
		key = mix64(key ^ mix64(b))
	}
	return key
}

// rendezvousScore is routers.py's rendezvous_score: -w / ln(u), u uniform in (0, 1) from (key, cluster).
func rendezvousScore(key uint64, c *summary) float64 {
	u := float64(mix64(key^mix64(c.nameHashVal))>>11) / float64(uint64(1)<<53)
	if u <= 0 {
		return math.Inf(1)
	}
	return -c.weight / math.Log(u)
}

func (s *summary) prefix(blocks []uint64) int {
	n := 0
	for _, b := range blocks {
		for _, p := range positions(b) {
			if s.bits[p>>3]&(byte(1)<<uint(p&7)) == 0 {
				return n
			}
		}
		n++
	}
	return n
}

// decoded is one summary as read, not yet taken for its cluster (accept).
type decoded struct {
	seq, publishedMs, replicas int64
	load                       float64
	bits                       []byte
}

// decodeSummary is summary.py's decode: the one flat object, every field in range; an error names it.
func decodeSummary(data []byte, c *summary, nowS float64) error {
	d, err := parseSummary(data, c.name, nowS)
	if err != nil {
		return err
	}
	return c.accept(d)
}

// accept takes a parsed summary for c unless it does not advance c's sequence (called with mu held).
func (c *summary) accept(d decoded) error {
	if c.hasSummary && d.seq <= c.seq {
		return errors.New("summary: field seq does not advance (a replayed or reordered summary)")
	}
	c.seq, c.publishedS, c.replicas, c.loadS, c.bits, c.hasSummary = d.seq, float64(d.publishedMs)/1000,
		int(d.replicas), d.load, d.bits, true
	return nil
}

// parseSummary checks everything of a summary that does not depend on what its cluster held
// before, so the background refresh runs it without the router's lock: it is ~11 KB of JSON and
// a popcount of 8 KiB, interpreted by Yaegi, which requests choosing a cluster must not wait for.
func parseSummary(data []byte, name string, nowS float64) (decoded, error) {
	var none decoded
	if len(data) > maxSummaryBytes {
		return none, errors.New("summary: too large")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return none, errors.New("summary: not a JSON object")
	}
	fields := []string{"cluster", "seq", "published_ms", "replicas", "load_s", "m", "k", "bits"}
	if len(obj) != len(fields) {
		return none, errors.New("summary: an object with exactly the fields " + strings.Join(fields, ", "))
	}
	for _, f := range fields {
		if _, ok := obj[f]; !ok {
			return none, errors.New("summary: field " + f + " is missing")
		}
	}
	var cluster, bitsText string
	var seq, publishedMs, replicas, m, k int64
	var load float64
	if json.Unmarshal(obj["cluster"], &cluster) != nil || cluster != name {
		return none, errors.New("summary: field cluster is not the cluster it was fetched from")
	}
	for _, f := range []struct {
		name      string
		into      *int64
		low, high int64
	}{{"seq", &seq, 0, math.MaxInt64}, {"published_ms", &publishedMs, 0, 1e15}, {"replicas", &replicas, 1, 4096},
		{"m", &m, summaryBits, summaryBits}, {"k", &k, summaryHashes, summaryHashes}} {
		if json.Unmarshal(obj[f.name], f.into) != nil || *f.into < f.low || *f.into > f.high {
			return none, errors.New("summary: field " + f.name + " is out of range")
		}
	}
	if json.Unmarshal(obj["load_s"], &load) != nil || math.IsNaN(load) || load < 0 || load > 1e6 {
		return none, errors.New("summary: field load_s is out of range")
	}
	if float64(publishedMs)/1000 > nowS+maxSkewS {
		return none, errors.New("summary: field published_ms is in the future")
	}
	if json.Unmarshal(obj["bits"], &bitsText) != nil {
		return none, errors.New("summary: field bits is not base64")
	}
	raw, err := base64.StdEncoding.DecodeString(bitsText)
	if err != nil || len(raw) != summaryBits/8 {
		return none, errors.New("summary: field bits must be base64 of 8192 bytes")
	}
	set := 0
	for i := 0; i < len(raw); i += 8 { // by words: an eighth of the interpreted iterations
		set += bits.OnesCount64(binary.LittleEndian.Uint64(raw[i : i+8]))
	}
	if float64(set)/summaryBits > maxFill {
		return none, errors.New("summary: field bits is saturated")
	}
	return decoded{seq: seq, publishedMs: publishedMs, replicas: replicas, load: load, bits: raw}, nil
}

// refresh reads a cluster's summary again when it is due: before this request with an interval of 0
// (what the simulator's publish interval 0 does); otherwise in the background, the request going on
// with the summary held (a request never waits for a fetch). Called with mu held.
func (cr *clusterRouter) refresh(c *summary, nowS float64) {
	if c.refreshing || (c.fetchedAtS > 0 && nowS-c.fetchedAtS < cr.interval) {
		return
	}
	c.fetchedAtS = nowS
	if cr.interval == 0 {
		if data := cr.fetch(c); data != nil {
			_ = decodeSummary(data, c, nowS) // a refused summary leaves the last good one, which goes stale
		}
		return
	}
	c.refreshing = true
	name := c.name
	go func() {
		var d decoded
		err := errors.New("summary: not read")
		if data := cr.fetch(c); data != nil {
			d, err = parseSummary(data, name, cr.now()) // outside the lock: requests go on meanwhile
		}
		cr.mu.Lock()
		defer cr.mu.Unlock()
		c.refreshing = false
		if err == nil {
			_ = c.accept(d)
		}
	}()
}

func (cr *clusterRouter) fetch(c *summary) []byte {
	ctx, cancel := context.WithTimeout(context.Background(), summaryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+clusterSummaryPath, nil)
	if err != nil {
		return nil
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxSummaryBytes+1))
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil
	}
	return data
}

func (cr *clusterRouter) overShare(i int, total float64) bool {
	n := len(cr.window)
	if n < 50 {
		return false
	}
	return float64(cr.counts[i])/float64(n) > cr.clusters[i].weight/total+cr.slack
}

func (cr *clusterRouter) record(i int) {
	cr.window = append(cr.window, i)
	cr.counts[i]++
	if len(cr.window) > cr.windowSize {
		cr.counts[cr.window[0]]--
		cr.window = cr.window[1:]
	}
}

func (cr *clusterRouter) unrecord(i int) {
	if n := len(cr.window); n > 0 && cr.window[n-1] == i {
		cr.window = cr.window[:n-1]
		cr.counts[i]--
	}
}

// choose is CacheAware.cluster_for followed by its record; -1 when every cluster is excluded.
func (cr *clusterRouter) choose(blocks []uint64, tokens int64, exclude map[int]bool) int {
	nowS := cr.now()
	var usable []int
	for i, c := range cr.clusters {
		if !exclude[i] && c.downUntilS <= nowS && c.weight > 0 {
			usable = append(usable, i)
		}
	}
	if len(usable) == 0 {
		for i, c := range cr.clusters {
			if !exclude[i] && c.weight > 0 {
				usable = append(usable, i)
			}
		}
		if len(usable) == 0 {
			return -1
		}
	}
	total := 0.0
	held := map[int]int{}
	work := map[int]float64{}
	load := map[int]float64{}
	predicted := map[int]float64{}
	for _, i := range usable {
		c := cr.clusters[i]
		total += c.weight
		cr.refresh(c, nowS)
		if c.hasSummary && c.seq != c.seenSeq {
			c.seenSeq = c.seq
			c.sentSinceS = 0
		}
		fresh := c.hasSummary && nowS-c.publishedS <= maxAgeS
		replicas := 1
		if c.hasSummary {
			replicas = c.replicas
		}
		if fresh {
			held[i] = c.prefix(blocks)
			load[i] = c.loadS
		}
		load[i] += c.sentSinceS / float64(replicas)
		work[i] = float64(tokens-hitTokens(held[i], tokens, cr.blockTokens))*cr.prefill + cr.decode
		predicted[i] = load[i] + work[i]
	}
	var within []int
	for _, i := range usable {
		if !cr.overShare(i, total) {
			within = append(within, i)
		}
	}
	if len(within) == 0 {
		within = usable
	}
	common := -1
	for _, i := range usable {
		if common < 0 || held[i] < common {
			common = held[i]
		}
	}
	chosen := -1
	for _, i := range within {
		if held[i] <= common {
			continue
		}
		if chosen < 0 || predicted[i] < predicted[chosen] ||
			(predicted[i] == predicted[chosen] && cr.clusters[i].name < cr.clusters[chosen].name) {
			chosen = i
		}
	}
	if chosen < 0 {
		chosen = cr.newPrefix(blocks, within, load)
	}
	cr.clusters[chosen].sentSinceS += work[chosen]
	cr.record(chosen)
	return chosen
}

// newPrefix is CacheAware._new: weighted rendezvous with bounded loads.
func (cr *clusterRouter) newPrefix(blocks []uint64, within []int, load map[int]float64) int {
	key := prefixKey(blocks)
	ranked := append([]int(nil), within...)
	sort.SliceStable(ranked, func(a, b int) bool {
		return rendezvousScore(key, cr.clusters[ranked[a]]) > rendezvousScore(key, cr.clusters[ranked[b]])
	})
	mean := 0.0
	for _, i := range within {
		mean += load[i]
	}
	bound := (1+cr.loadBound)*mean/float64(len(within)) + cr.loadFloor
	for _, i := range ranked {
		if load[i] <= bound {
			return i
		}
	}
	return ranked[0]
}

func (cr *clusterRouter) refused(i int, status int) {
	c := cr.clusters[i]
	cooldown := lostCooldownS
	if status == http.StatusTooManyRequests {
		cooldown = busyCooldownS
	}
	c.downUntilS = cr.now() + cooldown
	cr.unrecord(i)
}

func wallClock() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// serveCluster forwards the request to the chosen cluster's gateway, the next on a refusal.
func (r *Router) serveCluster(rw http.ResponseWriter, req *http.Request, blocks []uint64, tokens int64) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
	}
	exclude := map[int]bool{}
	for attempt := 0; attempt < len(r.cp.clusters); attempt++ {
		r.mu.Lock()
		i := r.cp.choose(blocks, tokens, exclude)
		r.mu.Unlock()
		if i < 0 {
			break
		}
		out, err := http.NewRequest(req.Method, r.cp.clusters[i].url+req.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			break
		}
		for k, v := range req.Header {
			out.Header[k] = v
		}
		resp, err := r.cp.clusters[i].client.Do(out)
		status := http.StatusServiceUnavailable
		if err == nil {
			status = resp.StatusCode
		}
		if err != nil || status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
			if resp != nil {
				resp.Body.Close()
			}
			r.mu.Lock()
			r.cp.refused(i, status)
			r.mu.Unlock()
			exclude[i] = true
			continue
		}
		for k, v := range resp.Header {
			rw.Header()[k] = v
		}
		rw.Header().Set("X-Modelplane-Cluster", r.cp.clusters[i].name)
		rw.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(rw, resp.Body)
		resp.Body.Close()
		return
	}
	http.Error(rw, "every cluster refused the request", http.StatusServiceUnavailable)
}
