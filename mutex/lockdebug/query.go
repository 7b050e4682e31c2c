package lockdebug

import (
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/redfence/redfence/mutex"
)

// query is a request's parameters (see the package documentation).
type query struct {
	json   bool
	all    bool
	match  string
	cursor string
	locker int // index into the handler's lockers
	scans  int // 0: List's default
	count  int // 0: List's default
}

// The largest scans and count a request may ask for: List's defaults. A
// request can make a page smaller, never costlier.
const (
	maxScans = 10
	maxCount = 1000
)

// maxCursor bounds the cursor parameter: one List returns is far shorter.
const maxCursor = 512

// maxEcho bounds how much of a bad parameter an error repeats.
const maxEcho = 64

// echo is a bad parameter's value as an error repeats it: quoted, so that
// its control and bidirectional characters show as escapes, and cut to
// maxEcho bytes, so that an error is never larger than its request.
func echo(s string) string {
	if len(s) > maxEcho {
		return strconv.Quote(s[:maxEcho]) + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return strconv.Quote(s)
}

// parseQuery reads r's parameters. On a bad one it returns the error, in
// words, with the format still chosen so that the error is served in it.
func parseQuery(r *http.Request, lockers []Named) (query, error) {
	var q query
	v := r.URL.Query()
	switch f := v.Get("format"); f {
	case "json":
		q.json = true
	case "html":
	case "":
		q.json = wantsJSON(r.Header.Values("Accept"))
	default:
		return q, fmt.Errorf("format %s is neither html nor json", echo(f))
	}
	if s := v.Get("all"); s != "" {
		all, err := strconv.ParseBool(s)
		if err != nil {
			return q, fmt.Errorf("all=%s: want 1 or 0", echo(s))
		}
		q.all = all
	}
	q.match, q.cursor = v.Get("match"), v.Get("cursor")
	// Oversize values are dropped, not shown again in the form and links.
	switch n := len(q.match); {
	case n > mutex.MaxKeyLen:
		q.match, q.cursor = "", ""
		return q, fmt.Errorf("match of %d bytes exceeds %d", n, mutex.MaxKeyLen)
	case len(q.cursor) > maxCursor:
		n = len(q.cursor)
		q.cursor = ""
		return q, fmt.Errorf("cursor of %d bytes is not one this page gave: start the listing again", n)
	}
	if name, ok := v["locker"]; ok {
		q.locker = -1
		for i, n := range lockers {
			if n.Name == name[0] {
				q.locker = i
				break
			}
		}
		if q.locker < 0 {
			return q, fmt.Errorf("locker %s: no Locker of that name", echo(name[0]))
		}
	}
	if q.all && len(lockers) == 0 {
		return q, fmt.Errorf("all=1: no Locker to list with")
	}
	var err error
	if q.scans, err = bounded(v, "scans", maxScans); err != nil {
		return q, err
	}
	if q.count, err = bounded(v, "count", maxCount); err != nil {
		return q, err
	}
	return q, nil
}

// bounded reads parameter name as an integer in 1..most; 0 when absent.
func bounded(v url.Values, name string, most int) (int, error) {
	s := v.Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > most {
		return 0, fmt.Errorf("%s=%s: want a whole number from 1 to %d", name, echo(s), most)
	}
	return n, nil
}

// wantsJSON: an Accept header that names application/json and not
// text/html (a browser names text/html; curl sends */*).
func wantsJSON(accept []string) bool {
	js, html := false, false
	for _, line := range accept {
		for part := range strings.SplitSeq(line, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err != nil || params["q"] == "0" {
				continue
			}
			switch mt {
			case "application/json":
				js = true
			case "text/html":
				html = true
			}
		}
	}
	return js && !html
}

// url is the page's address for q, relative to the page itself (a query
// only), in the given format.
func (q query) url(lockers []Named, json bool) string {
	v := url.Values{}
	if json {
		v.Set("format", "json")
	}
	if q.all {
		v.Set("all", "1")
		if q.match != "" {
			v.Set("match", q.match)
		}
		if q.cursor != "" {
			v.Set("cursor", q.cursor)
		}
		if len(lockers) > 1 && q.locker >= 0 && q.locker < len(lockers) {
			v.Set("locker", lockers[q.locker].Name)
		}
		if q.scans != 0 {
			v.Set("scans", strconv.Itoa(q.scans))
		}
		if q.count != 0 {
			v.Set("count", strconv.Itoa(q.count))
		}
	}
	return "?" + v.Encode()
}
