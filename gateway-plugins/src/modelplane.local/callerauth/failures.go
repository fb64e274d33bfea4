package callerauth

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// failures bounds the requests without a valid key that one source address may make: a token
// bucket of FailureBurst tokens, FailuresPerMinute back a minute. A source past it is answered
// 429 (Retry-After) before its key is even looked at, until the bucket refills, whatever key it
// sends: wrong keys are never free, and a source that guesses stays slow. Zero turns it off.
//
// The source is the connection's address (req.RemoteAddr): the client, or the last proxy or
// NAT before the gateway (a load balancer that does not keep the client's address puts many
// callers behind one source; raise or turn off the bound there). At most maxSources are
// tracked; when the table is full, the sources whose buckets have refilled are dropped, and if
// none has, the table starts over (its memory stays bounded whatever addresses arrive).
type failures struct {
	perSecond float64
	burst     float64
}

const maxSources = 100000

// Defaults: generous for a caller with a typo, slow for one that guesses.
const (
	defaultFailuresPerMinute = 60
	defaultFailureBurst      = 20
)

var (
	sourcesMu sync.Mutex
	sources   = map[string]*bucket{}
)

func newFailures(perMinute, burst int) failures {
	f := failures{perSecond: float64(perMinute) / 60, burst: float64(burst)}
	if perMinute > 0 && burst == 0 {
		f.burst = 1
	}
	return f
}

func (f failures) on() bool {
	return f.perSecond > 0
}

// sourceOf is the client's address without its port.
func sourceOf(req *http.Request) string {
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		return req.RemoteAddr
	}
	return host
}

// blocked says the seconds a source must wait before its next request is looked at (0: it may
// go on). It spends nothing: failed spends a token.
func (f failures) blocked(source string) int {
	if !f.on() {
		return 0
	}
	sourcesMu.Lock()
	defer sourcesMu.Unlock()
	b := sources[source]
	if b == nil {
		return 0
	}
	now := clock()
	b.refill(f.perSecond, f.burst, now)
	if b.tokens >= 1 {
		return 0
	}
	return b.wait(f.perSecond)
}

// failed counts one request without a valid key against its source.
func (f failures) failed(source string) {
	if !f.on() {
		return
	}
	sourcesMu.Lock()
	defer sourcesMu.Unlock()
	now := clock()
	b := sources[source]
	if b == nil {
		if len(sources) >= maxSources {
			f.prune(now)
		}
		fresh := fullBucket(f.burst, now)
		b = &fresh
		sources[source] = b
	}
	b.take(f.perSecond, f.burst, now)
}

func (f failures) prune(now time.Time) {
	for k, b := range sources {
		b.refill(f.perSecond, f.burst, now)
		if b.tokens >= f.burst {
			delete(sources, k)
		}
	}
	if len(sources) >= maxSources {
		sources = map[string]*bucket{}
	}
}
