package httplock

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"net/http"
	"strings"
)

// capture is the leader's ResponseWriter: it writes through to the leader's
// own client and keeps a copy for the others, up to a bound.
//
// Writes to the client that fail (the leader's client went away) are not
// reported to the handler: it must finish the response for the followers, and
// many handlers stop at the first write error.
type capture struct {
	w       http.ResponseWriter
	max     int64
	status  int
	header  http.Header // as sent with the status line
	body    bytes.Buffer
	reason  string // why this response cannot be shared; "" while it can
	clientE error  // first error writing to the leader's client
}

func newCapture(w http.ResponseWriter, max int64) *capture {
	return &capture{w: w, max: max}
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

// entry turns the capture into what followers get.
func (c *capture) entry(r *http.Request, roleHeader string, shareStatus func(int) bool) *entry {
	if c.status == 0 { // the handler wrote nothing: net/http sends 200, empty
		c.status = http.StatusOK
		c.header = c.w.Header().Clone()
	}
	reason := c.reason
	if reason == "" {
		reason = notShareable(c.status, c.header, shareStatus)
	}
	if reason != "" {
		return &entry{Kind: kindNoShare}
	}
	h := c.header
	if roleHeader != "" {
		h.Del(roleHeader)
	}
	dropHopByHop(h)
	e := &entry{Kind: kindResponse, Status: c.status, Header: h, Body: c.body.Bytes()}
	for _, v := range h.Values("Vary") {
		for _, f := range bytes.Split([]byte(v), []byte(",")) {
			name := http.CanonicalHeaderKey(string(bytes.TrimSpace(f)))
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
