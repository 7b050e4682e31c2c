package httplock

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
)

// capture is the leader's ResponseWriter: it writes through to the leader's
// own client and keeps a copy for the others, up to a bound.
//
// Only what the handler wrote is kept. The headers w already had when the
// handler started were set by middleware outside httplock (a request id, the
// role header): each follower has its own, so they stay with the leader's
// response. The handler sees and may change them, as usual; a header it
// set or changed is kept whole.
//
// Writes to the client that fail (the leader's client went away) are not
// reported to the handler: it must finish the response for the followers, and
// many handlers stop at the first write error.
type capture struct {
	w       http.ResponseWriter
	max     int64
	outer   http.Header // w's headers before the handler ran
	status  int
	header  http.Header // as sent with the status line
	body    bytes.Buffer
	reason  string // why this response cannot be shared; "" while it can
	clientE error  // first error writing to the leader's client
}

func newCapture(w http.ResponseWriter, max int64) *capture {
	return &capture{w: w, max: max, outer: w.Header().Clone()}
}

func (c *capture) Header() http.Header { return c.w.Header() }

func (c *capture) WriteHeader(code int) {
	if c.status != 0 {
		return // net/http ignores (and logs) superfluous calls; so do we
	}
	if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
		c.w.WriteHeader(code) // informational: more headers follow
		return
	}
	c.status = code
	c.header = c.w.Header().Clone()
	c.w.WriteHeader(code)
}

func (c *capture) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if c.reason == "" {
		if int64(c.body.Len()+len(p)) > c.max {
			c.reason = "oversize"
			c.body = bytes.Buffer{}
		} else {
			c.body.Write(p)
		}
	}
	if c.clientE == nil {
		if _, err := c.w.Write(p); err != nil {
			c.clientE = err
		}
	}
	return len(p), nil
}

// Flush streams: a streamed response is not shared (followers would get it
// only at the end, and streams are often endless).
func (c *capture) Flush() {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	c.reason = "streamed"
	if f, ok := c.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack hands the connection to the handler; nothing is shared.
func (c *capture) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c.reason = "hijacked"
	h, ok := c.w.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("httplock: the underlying ResponseWriter cannot hijack")
	}
	return h.Hijack()
}

// entry turns the capture into what followers get, or nil when it may not
// be shared. Whether it may is decided on the response as sent, outer
// middleware's headers included (a cookie or no-store set outside still
// makes it the leader's own), and so are the Vary headers a follower must
// match; what is stored is the status, the handler's headers and the body.
func (c *capture) entry(r *http.Request, roleHeader string, shareStatus func(int) bool) *entry {
	if c.status == 0 { // the handler wrote nothing: net/http sends 200, empty
		c.status = http.StatusOK
		c.header = c.w.Header().Clone()
	}
	if c.reason != "" || notShareable(c.status, c.header, shareStatus) != "" {
		return nil
	}
	dropHopByHop(c.header)
	h := http.Header{}
	for k, v := range c.header {
		if !slices.Equal(v, c.outer[k]) {
			h[k] = v
		}
	}
	if roleHeader != "" {
		h.Del(roleHeader)
	}
	e := &entry{Kind: kindResponse, Status: c.status, Header: h, Body: c.body.Bytes()}
	for _, v := range c.header.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			name := http.CanonicalHeaderKey(strings.TrimSpace(f))
			if name == "" {
				continue
			}
			if e.Vary == nil {
				e.Vary = map[string]string{}
			}
			e.Vary[name] = strings.Join(r.Header.Values(name), ", ")
		}
	}
	return e
}
