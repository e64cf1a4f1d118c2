package dataplane

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// defaultCORSMaxAge is how long a preflight's answer may be cached when
// the filter says nothing (the Gateway API's default).
const defaultCORSMaxAge = 5

// cors applies a CORS filter to r: a preflight request (OPTIONS with an
// Origin and Access-Control-Request-Method) is answered here, and
// answered reports so; another request from an allowed origin gets the
// headers to add to its response. An origin not allowed gets no CORS
// header, so the browser refuses the response.
func cors(w http.ResponseWriter, r *http.Request, f *gatewayv1.HTTPCORSFilter) (response *gatewayv1.HTTPHeaderFilter, answered bool) {
	origin := r.Header.Get("Origin")
	preflight := r.Method == http.MethodOptions && origin != "" && r.Header.Get("Access-Control-Request-Method") != ""
	allowed := origin != "" && slices.ContainsFunc(f.AllowOrigins, func(o gatewayv1.CORSOrigin) bool { return originMatches(string(o), origin) })
	credentials := f.AllowCredentials != nil && *f.AllowCredentials
	var h []gatewayv1.HTTPHeader
	set := func(name, value string) {
		if value != "" {
			h = append(h, gatewayv1.HTTPHeader{Name: gatewayv1.HTTPHeaderName(name), Value: value})
		}
	}
	if allowed {
		// The request's own origin, not "*": it holds with credentials.
		set("Access-Control-Allow-Origin", origin)
		set("Vary", "Origin")
		if credentials {
			set("Access-Control-Allow-Credentials", "true")
		}
	}
	if !preflight {
		if allowed {
			set("Access-Control-Expose-Headers", joinNames(f.ExposeHeaders))
			return &gatewayv1.HTTPHeaderFilter{Set: h}, false
		}
		return nil, false
	}
	method := r.Header.Get("Access-Control-Request-Method")
	if allowed && slices.ContainsFunc(f.AllowMethods, func(m gatewayv1.HTTPMethodWithWildcard) bool { return string(m) == "*" || string(m) == method }) {
		methods := make([]string, 0, len(f.AllowMethods))
		for _, m := range f.AllowMethods {
			methods = append(methods, string(m))
		}
		if slices.Contains(methods, "*") {
			// A wildcard holds only without credentials: name the method.
			methods = []string{method}
		}
		set("Access-Control-Allow-Methods", strings.Join(methods, ", "))
		headers := joinNames(f.AllowHeaders)
		if slices.Contains(f.AllowHeaders, "*") {
			headers = r.Header.Get("Access-Control-Request-Headers")
		}
		set("Access-Control-Allow-Headers", headers)
		set("Access-Control-Expose-Headers", joinNames(f.ExposeHeaders))
		maxAge := f.MaxAge
		if maxAge == 0 {
			maxAge = defaultCORSMaxAge
		}
		set("Access-Control-Max-Age", strconv.Itoa(int(maxAge)))
		for _, x := range h {
			w.Header().Set(string(x.Name), x.Value)
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil, true
}

func joinNames(names []gatewayv1.HTTPHeaderName) string {
	s := make([]string, len(names))
	for i, n := range names {
		s[i] = string(n)
	}
	return strings.Join(s, ", ")
}

// originMatches reports whether origin (scheme://host[:port]) is one the
// filter's allowOrigins entry allows: "*", the same origin, or one whose
// host has one or more labels in front of a wildcard's suffix, with the
// same scheme and port ("https://*.example.com").
func originMatches(allowed, origin string) bool {
	if allowed == "*" {
		return true
	}
	if strings.EqualFold(allowed, origin) {
		return true
	}
	a, err := url.Parse(allowed)
	if err != nil || !strings.HasPrefix(a.Host, "*.") {
		return false
	}
	o, err := url.Parse(origin)
	if err != nil || !strings.EqualFold(a.Scheme, o.Scheme) || a.Port() != o.Port() {
		return false
	}
	suffix := strings.ToLower(strings.TrimPrefix(a.Hostname(), "*"))
	host := strings.ToLower(o.Hostname())
	return len(host) > len(suffix) && strings.HasSuffix(host, suffix)
}
