package httplock

import (
	"bufio"
	"bytes"
	"errors"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/redfence/redfence/internal/httphdr"
)

// capture is the leader's ResponseWriter. While the response may still be
// shared it only buffers: the response is stored and announced first, and
// sent to the leader's own client after (replay), so a client that does not
// read cannot hold up the requests waiting on it. Once the response cannot
// be shared (a status or header the policy refuses, past the max body, a
// flush or a hijack) unshared is called, before anything reaches the
// client, and the buffer is written out and the rest written through.
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
	w        http.ResponseWriter
	r        *http.Request
	max      int64
	policy   func(status int, h http.Header) string // notShareable, bound to the options
	unshared func()                                 // called once, while the handler runs, as the response is found unshareable
	outer    http.Header                            // w's headers before the handler ran, canonical
	status   int
	header   http.Header // as sent with the status line, canonical
	body     bytes.Buffer
	reason   string // why this response cannot be shared; "" while it can
	through  bool   // the status line is sent: writes go to the client
	clientE  error  // first error writing to the leader's client
}

func newCapture(w http.ResponseWriter, r *http.Request, max int64, policy func(int, http.Header) string, unshared func()) *capture {
	return &capture{w: w, r: r, max: max, policy: policy, unshared: unshared, outer: httphdr.Canonical(w.Header())}
}

func (c *capture) Header() http.Header { return c.w.Header() }

func (c *capture) WriteHeader(code int) {
	if c.status != 0 {
		return // net/http ignores (and logs) superfluous calls; so do we
	}
	if code < 100 || code > 999 {
		c.reason, c.through = "status", true
		c.w.WriteHeader(code) // net/http panics, as it would without httplock
		return
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		c.w.WriteHeader(code) // informational: more headers follow
		return
	}
	c.status = code
	c.header = httphdr.Canonical(c.w.Header())
	if reason := c.policy(code, c.header); reason != "" {
		c.writeThrough(reason) // nothing to wait for: the client gets it as it comes
	}
}

func (c *capture) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if !c.through {
		if int64(c.body.Len()+len(p)) <= c.max {
			c.body.Write(p)
			return len(p), nil
		}
		c.writeThrough("oversize")
	}
	c.send(p)
	return len(p), nil
}

// writeThrough makes the response the leader's own, for reason: it calls
// unshared (the waiters need not wait for the rest), then sends the status
// line and what was buffered, and from then on writes through.
func (c *capture) writeThrough(reason string) {
	if c.reason == "" {
		c.reason = reason
	}
	if c.through {
		return
	}
	c.through = true
	c.unshared()
	if c.status != 0 {
		c.w.WriteHeader(c.status)
	}
	if c.body.Len() > 0 {
		c.send(c.body.Bytes())
	}
	c.body = bytes.Buffer{}
}

// send writes p to the leader's client. A body longer than the handler's
// Content-Length is no answer to share either.
func (c *capture) send(p []byte) {
	if c.clientE != nil {
		return
	}
	if _, err := c.w.Write(p); err != nil {
		c.clientE = err
		if errors.Is(err, http.ErrContentLength) {
			c.reason = "content-length"
		}
	}
}

// Flush streams: a streamed response is not shared (followers would get it
// only at the end, and streams are often endless).
func (c *capture) Flush() {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	c.writeThrough("streamed")
	if f, ok := c.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack hands the connection to the handler; nothing is shared.
func (c *capture) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := c.w.(http.Hijacker)
	if !ok {
		c.writeThrough("hijacked")
		return nil, nil, errors.New("httplock: the underlying ResponseWriter cannot hijack")
	}
	// Nothing buffered may be written to a hijacked connection: what the
	// handler wrote before is lost, as net/http would lose it.
	if !c.through {
		c.unshared()
	}
	c.reason, c.through = "hijacked", true
	return h.Hijack()
}

// replay sends a buffered response to the leader's own client, once the
// others have it: the status line with the headers as they were when the
// handler wrote it (net/http ignores later changes; trailers set after the
// body are kept), then the body. It blocks as long as the client does not
// read. It does nothing when the response was written through.
func (c *capture) replay() {
	if c.through {
		return
	}
	c.through = true
	dst := c.w.Header()
	for k := range dst {
		if !strings.HasPrefix(k, http.TrailerPrefix) {
			delete(dst, k)
		}
	}
	maps.Copy(dst, c.header)
	c.w.WriteHeader(c.status)
	if c.body.Len() > 0 {
		c.send(c.body.Bytes())
	}
}

// entry turns the capture into what followers get, or nil when it may not
// be shared. Whether it may is decided on the response as sent, outer
// middleware's headers included (a cookie or no-store set outside still
// makes it the leader's own), and so are the Vary headers a follower must
// match; what is stored is the status, the handler's headers and the body
// (none for HEAD). The headers are canonical, their values merged, so that
// "set-cookie" is seen as Set-Cookie. It leaves the capture as it was, for
// replay.
//
// The entry is kept for window, or less when the response's Cache-Control
// says it is fresh for less (see shareFor).
func (c *capture) entry(roleHeader string, window time.Duration) *entry {
	if c.status == 0 { // the handler wrote nothing: net/http sends 200, empty
		c.status = http.StatusOK
		c.header = httphdr.Canonical(c.w.Header())
	}
	if c.reason != "" || c.policy(c.status, c.header) != "" {
		return nil
	}
	var body []byte
	if bodyAllowed(c.r.Method, c.status) {
		if !contentLengthMatches(c.header, c.body.Len()) {
			return nil
		}
		body = bytes.Clone(c.body.Bytes())
	}
	ttl := shareFor(c.header, window)
	if ttl < time.Millisecond {
		return nil
	}
	sent := c.header.Clone()
	httphdr.DropHopByHop(sent)
	h := http.Header{}
	for k, v := range sent {
		if !slices.Equal(v, c.outer[k]) {
			h[k] = v
		}
	}
	if roleHeader != "" {
		h.Del(roleHeader)
	}
	e := &entry{Kind: kindResponse, Status: c.status, Header: h, Body: body, ttl: ttl}
	for _, v := range sent.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			name := http.CanonicalHeaderKey(strings.TrimSpace(f))
			if name == "" {
				continue
			}
			if e.Vary == nil {
				e.Vary = map[string]string{}
			}
			e.Vary[name] = varyDigest(c.r.Header.Values(name))
		}
	}
	return e
}
