// Package callerauth is a Traefik middleware (a local plugin, interpreted by Traefik's
// Yaegi) that turns an API key into a caller identity.
//
// A request must carry `Authorization: Bearer <key>` or `x-api-key: <key>`. The key is
// hashed (SHA-256) and looked up among the hashes of the callers' keys read from KeysDir
// (one file per caller: the file name is the identity, the content the key or
// `sha256:<64 hex>`). A source address that sent FailuresPerMinute requests without a valid
// key is answered 429 until its budget refills, before any lookup. On success the key headers are removed and CallerHeader is
// set to the identity; any header a client sent under that name (in any case, with `_`
// for `-`) is dropped first. Otherwise the answer is 401 with an OpenAI-shaped body.
//
// Beyond authentication: Allowed (when not empty) names the callers this router's
// service accepts (403 for the others), and RequestsPerMinute/Burst and InFlight bound
// each caller across every router of this gateway (429 with Retry-After).
//
// KeysDir is checked on every request (one stat), and every key file read again at least
// every second or so: adding or removing a caller file takes effect on the next request, a
// file overwritten in place within the recheck interval, while requests already in flight go on.
package callerauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
)

// Config is the middleware's dynamic configuration.
type Config struct {
	KeysDir           string   `json:"keysDir,omitempty"`
	CallerHeader      string   `json:"callerHeader,omitempty"`
	Allowed           []string `json:"allowed,omitempty"`
	Service           string   `json:"service,omitempty"`
	RequestsPerMinute int      `json:"requestsPerMinute,omitempty"`
	Burst             int      `json:"burst,omitempty"`
	InFlight          int      `json:"inFlight,omitempty"`
	// Requests without a valid key one source address may make (failures.go); 0: no bound.
	FailuresPerMinute int `json:"failuresPerMinute,omitempty"`
	FailureBurst      int `json:"failureBurst,omitempty"`
}

// CreateConfig returns the defaults Traefik decodes the configuration into.
func CreateConfig() *Config {
	return &Config{CallerHeader: "x-modelplane-caller", FailuresPerMinute: defaultFailuresPerMinute,
		FailureBurst: defaultFailureBurst}
}

// Auth is one configured instance (one per router that uses it).
type Auth struct {
	next         http.Handler
	name         string
	keys         *keyring
	callerHeader string
	callerNames  []string // every canonical spelling of the caller header ('-' or '_' between words)
	allowed      map[string]bool
	service      string
	limits       limits
	failures     failures
}

// New builds the middleware; Traefik calls it for every configuration it loads.
func New(_ context.Context, next http.Handler, config *Config, name string) (http.Handler, error) {
	if config.KeysDir == "" {
		return nil, errors.New("callerauth: keysDir is required")
	}
	if config.CallerHeader == "" {
		return nil, errors.New("callerauth: callerHeader is required")
	}
	if config.RequestsPerMinute < 0 || config.Burst < 0 || config.InFlight < 0 || config.FailuresPerMinute < 0 ||
		config.FailureBurst < 0 {
		return nil, errors.New("callerauth: requestsPerMinute, burst, inFlight, failuresPerMinute and failureBurst " +
			"must not be negative")
	}
	a := &Auth{
		next:         next,
		name:         name,
		keys:         sharedKeyring(config.KeysDir),
		callerHeader: http.CanonicalHeaderKey(config.CallerHeader),
		callerNames:  spellings(config.CallerHeader),
		service:      config.Service,
		limits:       newLimits(config.RequestsPerMinute, config.Burst, config.InFlight),
		failures:     newFailures(config.FailuresPerMinute, config.FailureBurst),
	}
	if len(config.Allowed) > 0 {
		a.allowed = make(map[string]bool, len(config.Allowed))
		for _, c := range config.Allowed {
			a.allowed[c] = true
		}
	}
	return a, nil
}

func (a *Auth) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	key := presentedKey(req)
	// Whatever happens next, no key and no client-chosen identity travel further.
	req.Header.Del("Authorization")
	req.Header.Del("X-Api-Key")
	a.dropCallerHeaders(req.Header)

	source := sourceOf(req)
	if wait := a.failures.blocked(source); wait > 0 {
		// Refused before the key is looked at: a source that keeps failing is slowed, not served.
		writeError(rw, http.StatusTooManyRequests, "too_many_failed_attempts", "requests",
			"Too many requests without a valid API key from this address; retry later.", wait)
		return
	}
	if key == "" {
		a.failures.failed(source)
		writeError(rw, http.StatusUnauthorized, "missing_api_key", "invalid_request_error",
			"No API key provided: send `Authorization: Bearer <key>` (or `x-api-key: <key>`).", 0)
		return
	}
	caller := a.keys.lookup(sha256.Sum256([]byte(key)))
	if caller == "" {
		a.failures.failed(source)
		writeError(rw, http.StatusUnauthorized, "invalid_api_key", "invalid_request_error",
			"Incorrect API key provided.", 0)
		return
	}
	if a.allowed != nil && !a.allowed[caller] {
		writeError(rw, http.StatusForbidden, "caller_not_allowed", "permission_error",
			"Caller "+caller+" may not use "+a.serviceName()+".", 0)
		return
	}
	req.Header.Set(a.callerHeader, caller)
	if !a.limits.on() {
		a.next.ServeHTTP(rw, req)
		return
	}
	retryAfter, why := a.limits.admit(caller)
	if why != "" {
		writeError(rw, http.StatusTooManyRequests, "rate_limit_exceeded", "requests",
			"Caller "+caller+" is over its "+why+" limit; retry later.", retryAfter)
		return
	}
	defer a.limits.release(caller)
	a.next.ServeHTTP(rw, req)
}

func (a *Auth) serviceName() string {
	if a.service == "" {
		return "this service"
	}
	return "service " + a.service
}

// presentedKey is the key of `Authorization: Bearer <key>`, else of `x-api-key`.
func presentedKey(req *http.Request) string {
	if auth := req.Header.Get("Authorization"); auth != "" {
		if len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
			return strings.TrimSpace(auth[7:])
		}
		return ""
	}
	return strings.TrimSpace(req.Header.Get("X-Api-Key"))
}

// dropCallerHeaders removes every header that an engine could read as the caller header:
// any case, and `_` for `-` (some servers fold one into the other). Go's server stores each
// request header under its canonical spelling (any case becomes one), so the spellings
// computed once in New are all there is to delete.
func (a *Auth) dropCallerHeaders(h http.Header) {
	for _, k := range a.callerNames {
		delete(h, k)
	}
}

// spellings is every canonical header key that reads as name once `_` is taken for `-`.
func spellings(name string) []string {
	parts := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == '-' || r == '_' })
	out := []string{""}
	for i, p := range parts {
		next := []string{}
		for _, o := range out {
			if i == 0 {
				next = append(next, p)
				continue
			}
			next = append(next, o+"-"+p, o+"_"+p)
		}
		out = next
	}
	for i, o := range out {
		out[i] = http.CanonicalHeaderKey(o)
	}
	return out
}

func normalizeHeader(name string) string {
	return strings.ReplaceAll(strings.ToLower(name), "_", "-")
}
