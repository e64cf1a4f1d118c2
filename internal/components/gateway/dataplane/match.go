package dataplane

import (
	"fmt"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// portRoutes are a Port's hosts, ready to match requests.
type portRoutes struct {
	exact     map[string]*hostRoutes
	wildcards []*hostRoutes // longest suffix first
	any       *hostRoutes
}

// hostRoutes are a Host's routes, their regular expressions compiled,
// grouped by the hostnames they take, each group in precedence order.
type hostRoutes struct {
	host      *Host
	exact     map[string][]*compiledRoute
	wildcards []hostnameRoutes // longest suffix first
	any       []*compiledRoute // the routes without hostnames
}

type hostnameRoutes struct {
	suffix string // ".example.com"
	routes []*compiledRoute
}

type compiledRoute struct {
	*Route
	path    *regexp.Regexp   // a RegularExpression path's
	headers []*regexp.Regexp // a RegularExpression header's, by index
	query   []*regexp.Regexp // a RegularExpression query parameter's
	// requestTimeout and backendTimeout are Timeouts' (0: none).
	requestTimeout, backendTimeout time.Duration
	// retryCodes, retries and backoff are Retry's.
	retryCodes map[int]bool
	retries    int
	backoff    time.Duration
	// session is SessionPersistence's, nil without it.
	session *session
}

// defaultBackoff is the pause between tries when Retry names none.
const defaultBackoff = 25 * time.Millisecond

// compile indexes p's hosts and compiles their routes' expressions; a
// route whose expression does not compile is left out, with an error.
func compile(p *Port) (*portRoutes, []error) {
	pr := &portRoutes{exact: map[string]*hostRoutes{}}
	var errs []error
	for i := range p.Hosts {
		h := &p.Hosts[i]
		hr := &hostRoutes{host: h, exact: map[string][]*compiledRoute{}}
		wildcards := map[string]int{}
		for j := range h.Routes {
			cr, err := compileRoute(&h.Routes[j])
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", h.Routes[j].Name, err))
				continue
			}
			if len(cr.Hostnames) == 0 {
				hr.any = append(hr.any, &cr)
			}
			for _, name := range cr.Hostnames {
				switch name = strings.ToLower(name); {
				case strings.HasPrefix(name, "*."):
					k, ok := wildcards[name]
					if !ok {
						k = len(hr.wildcards)
						wildcards[name] = k
						hr.wildcards = append(hr.wildcards, hostnameRoutes{suffix: name[1:]})
					}
					hr.wildcards[k].routes = append(hr.wildcards[k].routes, &cr)
				default:
					hr.exact[name] = append(hr.exact[name], &cr)
				}
			}
		}
		slices.SortStableFunc(hr.wildcards, func(a, b hostnameRoutes) int { return len(b.suffix) - len(a.suffix) })
		switch name := strings.ToLower(h.Hostname); {
		case name == "" || name == "*":
			pr.any = hr
		case strings.HasPrefix(name, "*."):
			pr.wildcards = append(pr.wildcards, hr)
		default:
			pr.exact[name] = hr
		}
	}
	slices.SortStableFunc(pr.wildcards, func(a, b *hostRoutes) int { return len(b.host.Hostname) - len(a.host.Hostname) })
	return pr, errs
}

func compileRoute(r *Route) (compiledRoute, error) {
	cr := compiledRoute{Route: r}
	if err := cr.compilePolicies(); err != nil {
		return cr, err
	}
	m := r.Match
	if m.Path != nil && m.Path.Type != nil && *m.Path.Type == gatewayv1.PathMatchRegularExpression && m.Path.Value != nil {
		re, err := regexp.Compile("^(?:" + *m.Path.Value + ")$")
		if err != nil {
			return cr, err
		}
		cr.path = re
	}
	for _, h := range m.Headers {
		var re *regexp.Regexp
		if h.Type != nil && *h.Type == gatewayv1.HeaderMatchRegularExpression {
			var err error
			if re, err = regexp.Compile(h.Value); err != nil {
				return cr, err
			}
		}
		cr.headers = append(cr.headers, re)
	}
	for _, q := range m.QueryParams {
		var re *regexp.Regexp
		if q.Type != nil && *q.Type == gatewayv1.QueryParamMatchRegularExpression {
			var err error
			if re, err = regexp.Compile(q.Value); err != nil {
				return cr, err
			}
		}
		cr.query = append(cr.query, re)
	}
	return cr, nil
}

// requestHost is a request's host, its port left out, in lower case.
func requestHost(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

// lookup is the Host of a request for host (requestHost): an exact name,
// else the longest wildcard whose suffix it has (with at least one label
// in front), else the host for any; nil if none.
func (pr *portRoutes) lookup(host string) *hostRoutes {
	if hr, ok := pr.exact[host]; ok {
		return hr
	}
	for _, hr := range pr.wildcards {
		suffix := strings.ToLower(hr.host.Hostname[1:]) // ".example.com"
		if len(host) > len(suffix) && strings.HasSuffix(host, suffix) {
			return hr
		}
	}
	return pr.any
}

// routes are the routes whose hostnames match host (requestHost) most
// specifically, in precedence order.
func (hr *hostRoutes) routes(host string) []*compiledRoute {
	if routes, ok := hr.exact[host]; ok {
		return routes
	}
	for _, w := range hr.wildcards {
		if len(host) > len(w.suffix) && strings.HasSuffix(host, w.suffix) {
			return w.routes
		}
	}
	return hr.any
}

// match is the first route that matches r of those whose hostnames match
// r's host (requestHost) most specifically.
func (hr *hostRoutes) match(host string, r *http.Request) *compiledRoute {
	for _, cr := range hr.routes(host) {
		if cr.matches(r) {
			return cr
		}
	}
	return nil
}

func (cr *compiledRoute) matches(r *http.Request) bool {
	m := cr.Match
	if m.Method != nil && string(*m.Method) != r.Method {
		return false
	}
	if !cr.pathMatches(r.URL.Path) {
		return false
	}
	for i, h := range m.Headers {
		values := r.Header.Values(string(h.Name))
		if strings.EqualFold(string(h.Name), "host") {
			values = []string{r.Host}
		}
		if !slices.ContainsFunc(values, func(v string) bool {
			if re := cr.headers[i]; re != nil {
				return re.MatchString(v)
			}
			return v == h.Value
		}) {
			return false
		}
	}
	if len(m.QueryParams) > 0 {
		query := r.URL.Query()
		for i, q := range m.QueryParams {
			values, ok := query[string(q.Name)]
			if !ok || len(values) == 0 {
				return false
			}
			// The first value counts, as the API says.
			if re := cr.query[i]; re != nil && !re.MatchString(values[0]) || re == nil && values[0] != q.Value {
				return false
			}
		}
	}
	return true
}

func (cr *compiledRoute) pathMatches(path string) bool {
	p := cr.Match.Path
	if p == nil || p.Value == nil {
		return true
	}
	switch {
	case cr.path != nil:
		return cr.path.MatchString(path)
	case p.Type != nil && *p.Type == gatewayv1.PathMatchExact:
		return path == *p.Value
	default:
		return prefixMatches(*p.Value, path)
	}
}

// prefixMatches reports whether path has prefix element by element, as
// PathPrefix (and Ingress's Prefix) match: /abc matches /abc, /abc/ and
// /abc/def, not /abcd; a trailing slash of the prefix does not count.
func prefixMatches(prefix, path string) bool {
	prefix = strings.TrimRight(prefix, "/")
	if prefix == "" {
		return true
	}
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// replacePrefix replaces the prefix path matched (element by element) with
// replacement, as ReplacePrefixMatch does: /foo with /bar makes /foo/baz
// /bar/baz, and with / makes /foo/baz /baz and /foo /.
func replacePrefix(path, prefix, replacement string) string {
	rest := strings.TrimPrefix(path, strings.TrimRight(prefix, "/"))
	replacement = strings.TrimRight(replacement, "/")
	if replacement == "" && (rest == "" || rest == "/") {
		return "/"
	}
	return replacement + rest
}

// compilePolicies parses the route's timeouts and retry.
func (cr *compiledRoute) compilePolicies() error {
	duration := func(what string, d *gatewayv1.Duration) (time.Duration, error) {
		if d == nil {
			return 0, nil
		}
		v, err := time.ParseDuration(string(*d))
		if err != nil || v < 0 {
			return 0, fmt.Errorf("%s %q is not a duration", what, *d)
		}
		return v, nil
	}
	var err error
	if t := cr.Timeouts; t != nil {
		if cr.requestTimeout, err = duration("timeouts.request", t.Request); err != nil {
			return err
		}
		if cr.backendTimeout, err = duration("timeouts.backendRequest", t.BackendRequest); err != nil {
			return err
		}
	}
	if sp := cr.SessionPersistence; sp != nil {
		expiry, err := duration("sessionPersistence.absoluteTimeout", sp.AbsoluteTimeout)
		if err != nil {
			return err
		}
		cr.session = compileSession(cr.Route, expiry)
	}
	if r := cr.Retry; r != nil {
		cr.retries = ptr.Deref(r.Attempts, 0)
		cr.retryCodes = map[int]bool{}
		for _, c := range r.Codes {
			cr.retryCodes[int(c)] = true
		}
		if cr.backoff, err = duration("retry.backoff", r.Backoff); err != nil {
			return err
		}
		if r.Backoff == nil {
			cr.backoff = defaultBackoff
		}
	}
	return nil
}
