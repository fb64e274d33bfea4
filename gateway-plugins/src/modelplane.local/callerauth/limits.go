package callerauth

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// limits bounds one caller's request rate (a token bucket: RequestsPerMinute, Burst
// tokens at most) and the requests it has in flight. Zero turns a bound off. The state is
// per caller and shared by every router and every reloaded configuration of the
// gateway, so a caller's streams in flight stay counted across a key rotation. Callers
// are the identities of KeysDir, so the state is bounded by the number of callers.
type limits struct {
	perSecond float64
	burst     float64
	inFlight  int
}

type callerState struct {
	bucket   bucket
	inFlight int
}

var (
	statesMu sync.Mutex
	states   = map[string]*callerState{}
	// clock is the time every bound reads (tests replace it).
	clock = time.Now
)

// bucket is a token bucket: `burst` tokens at most, `perSecond` back each second.
type bucket struct {
	tokens float64
	last   time.Time
}

func fullBucket(burst float64, now time.Time) bucket {
	return bucket{tokens: burst, last: now}
}

// take spends one token, or says how many seconds until one is back (0: taken).
func (b *bucket) take(perSecond, burst float64, now time.Time) int {
	b.refill(perSecond, burst, now)
	if b.tokens < 1 {
		return b.wait(perSecond)
	}
	b.tokens--
	return 0
}

// wait is the whole seconds until the bucket holds a token again (at least 1).
func (b *bucket) wait(perSecond float64) int {
	return int(math.Max(1, math.Ceil((1-b.tokens)/perSecond)))
}

func (b *bucket) refill(perSecond, burst float64, now time.Time) {
	b.tokens = math.Min(burst, b.tokens+now.Sub(b.last).Seconds()*perSecond)
	b.last = now
}

func newLimits(perMinute, burst, inFlight int) limits {
	l := limits{perSecond: float64(perMinute) / 60, burst: float64(burst), inFlight: inFlight}
	if perMinute > 0 && burst == 0 {
		l.burst = math.Max(1, math.Ceil(l.perSecond)) // one second's worth
	}
	return l
}

func (l limits) on() bool {
	return l.perSecond > 0 || l.inFlight > 0
}

// admit counts one request of caller in, or says which limit refused it ("" admitted) and
// the seconds to wait. An admitted request is counted out by release.
func (l limits) admit(caller string) (int, string) {
	statesMu.Lock()
	defer statesMu.Unlock()
	s := states[caller]
	now := clock()
	if s == nil {
		s = &callerState{bucket: fullBucket(l.burst, now)}
		states[caller] = s
	}
	if l.inFlight > 0 && s.inFlight >= l.inFlight {
		return 1, "in-flight request"
	}
	if l.perSecond > 0 {
		if wait := s.bucket.take(l.perSecond, l.burst, now); wait > 0 {
			return wait, "request rate"
		}
	}
	s.inFlight++
	return 0, ""
}

func (l limits) release(caller string) {
	statesMu.Lock()
	if s := states[caller]; s != nil && s.inFlight > 0 {
		s.inFlight--
	}
	statesMu.Unlock()
}

// writeError answers in the shape OpenAI's API uses, which OpenAI clients show.
func writeError(rw http.ResponseWriter, status int, code, kind, message string, retryAfter int) {
	body, _ := json.Marshal(map[string]interface{}{
		"error": map[string]interface{}{"message": message, "type": kind, "param": nil, "code": code},
	})
	h := rw.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="modelplane"`)
	}
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	rw.WriteHeader(status)
	_, _ = rw.Write(body)
}
