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
	tokens   float64
	last     time.Time
	inFlight int
}

var (
	statesMu sync.Mutex
	states   = map[string]*callerState{}
)

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
	now := time.Now()
	if s == nil {
		s = &callerState{tokens: l.burst, last: now}
		states[caller] = s
	}
	if l.inFlight > 0 && s.inFlight >= l.inFlight {
		return 1, "in-flight request"
	}
	if l.perSecond > 0 {
		s.tokens = math.Min(l.burst, s.tokens+now.Sub(s.last).Seconds()*l.perSecond)
		s.last = now
		if s.tokens < 1 {
			return int(math.Max(1, math.Ceil((1-s.tokens)/l.perSecond))), "request rate"
		}
		s.tokens--
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
