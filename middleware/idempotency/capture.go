package idempotency

import (
	"bufio"
	"bytes"
	"errors"
	"maps"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/redfence/redfence/internal/httphdr"
)

// capture is the ResponseWriter of the request that runs the handler. It
// buffers the response, which reaches the client only after it is stored
// (send): a client that sees an answer can count on a retry seeing the same
// one. A response that cannot be stored (past the max body, flushed,
// hijacked) is written through from then on, and its reason kept.
//
// Only what the handler wrote is stored: the headers w had before the
// handler ran (outer) were set by middleware outside, for this response
// alone (a request id, a session cookie), and none of their values is
// replayed, even in a field the handler added to.
type capture struct {
	w       http.ResponseWriter
	max     int64
	outer   http.Header // w's headers before the handler ran, canonical
	status  int
	header  http.Header // as of the status line, canonical
	body    bytes.Buffer
	reason  string // why the response cannot be stored; "" while it can
	through bool   // the status line went to the client: writes go through
}

func newCapture(w http.ResponseWriter, max int64) *capture {
	return &capture{w: w, max: max, outer: httphdr.Canonical(w.Header())}
}

func (c *capture) Header() http.Header { return c.w.Header() }

func (c *capture) WriteHeader(code int) {
	if c.status != 0 {
		return // net/http ignores superfluous calls; so do we
	}
	if code < 200 || code > 599 {
		if code >= 100 && code < 200 && code != http.StatusSwitchingProtocols {
			c.w.WriteHeader(code) // informational: more headers follow
			return
		}
		c.status = code
		c.writeThrough("status") // net/http panics on a bad code, as without us
		return
	}
	c.status = code
	c.header = httphdr.Canonical(c.w.Header())
}

func (c *capture) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if !c.through {
		if int64(c.body.Len()+len(p)) <= c.max {
			return c.body.Write(p)
		}
		c.writeThrough("oversize")
	}
	return c.w.Write(p)
}

// writeThrough sends the status line and the buffer, and from then on
// writes go to the client: the response will not be stored, for reason.
func (c *capture) writeThrough(reason string) {
	if c.reason == "" {
		c.reason = reason
	}
	if c.through {
		return
	}
	c.through = true
	if c.status != 0 {
		c.w.WriteHeader(c.status)
	}
	if c.body.Len() > 0 {
		_, _ = c.w.Write(c.body.Bytes())
	}
	c.body = bytes.Buffer{}
}

// Flush streams: a stream is not stored (a retry would get it only whole,
// and streams are often endless).
func (c *capture) Flush() {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	c.writeThrough("streamed")
	if f, ok := c.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack hands the connection to the handler; nothing is stored.
func (c *capture) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := c.w.(http.Hijacker)
	if !ok {
		c.writeThrough("hijacked")
		return nil, nil, errors.New("idempotency: the underlying ResponseWriter cannot hijack")
	}
	c.reason, c.through = "hijacked", true // what was buffered is lost, as net/http would lose it
	return h.Hijack()
}

// Unwrap lets http.ResponseController reach the connection's writer for
// deadlines; its Flush and Hijack stop at capture's own.
func (c *capture) Unwrap() http.ResponseWriter { return c.w }

// finish settles a handler that wrote nothing: net/http sends 200, empty.
func (c *capture) finish() {
	if c.status == 0 {
		c.status = http.StatusOK
		c.header = httphdr.Canonical(c.w.Header())
	}
}

// stored returns the record of a response that may be stored, with the
// values the handler added to each header (never outer middleware's, even
// in a field both wrote, and never Set-Cookie, Set-Cookie2 or hop-by-hop
// ones unless replayable names them), and its body. A body that
// contradicts the handler's Content-Length is not.
func (c *capture) stored(fp string, replayable map[string]bool) *record {
	if c.reason != "" {
		return nil
	}
	rec := &record{State: stateDone, FP: fp, Status: c.status, Header: http.Header{}}
	drop := c.header.Clone()
	httphdr.DropHopByHop(drop)
	for k, v := range c.header {
		switch {
		case replayable[k]:
		case k == "Set-Cookie", k == "Set-Cookie2", drop[k] == nil, strings.HasPrefix(k, http.TrailerPrefix):
			continue
		}
		vals, appended := added(v, c.outer[k])
		if len(vals) == 0 {
			continue // outer middleware's, unchanged
		}
		rec.Header[k] = vals
		if appended {
			rec.Append = append(rec.Append, k)
		}
	}
	slices.Sort(rec.Append)
	if cl := c.header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(c.body.Len()) {
		c.reason = "content-length"
		return nil
	}
	rec.Body = bytes.Clone(c.body.Bytes())
	return rec
}

// added returns the values of a header field the handler wrote (now) that
// were not there before it ran, and whether it appended them to outer
// middleware's values (a replay then appends them to the retry's own) or
// replaced the field (a replay sets it). Values are compared one by one, so
// that no value outer middleware set for the first request is stored.
func added(now, before []string) ([]string, bool) {
	if len(before) > 0 && len(now) >= len(before) && slices.Equal(now[:len(before)], before) {
		return slices.Clone(now[len(before):]), true
	}
	left := slices.Clone(before)
	var out []string
	for _, v := range now {
		if i := slices.Index(left, v); i >= 0 {
			left = slices.Delete(left, i, i+1)
			continue
		}
		out = append(out, v)
	}
	return out, false
}

// reset puts w's headers back as outer middleware left them, before a
// refused (superseded) handler's request is answered with something else:
// the refused headers (a secret, its Content-Length) are not that answer's.
func (c *capture) reset() {
	dst := c.w.Header()
	clear(dst)
	for k, v := range c.outer {
		dst[k] = slices.Clone(v)
	}
}

// send writes the buffered response to the client: the headers as they
// were at the status line (trailers set later kept: those of a name the
// Trailer header declared, and http.TrailerPrefix ones), then the body. It
// does nothing when the response was written through.
func (c *capture) send() {
	if c.through {
		return
	}
	c.through = true
	dst := c.w.Header()
	declared := map[string]bool{}
	for _, f := range c.header.Values("Trailer") {
		for _, name := range strings.Split(f, ",") {
			declared[http.CanonicalHeaderKey(strings.TrimSpace(name))] = true
		}
	}
	for k := range dst {
		if !strings.HasPrefix(k, http.TrailerPrefix) && !declared[http.CanonicalHeaderKey(k)] {
			delete(dst, k)
		}
	}
	maps.Copy(dst, c.header)
	c.w.WriteHeader(c.status)
	if c.body.Len() > 0 {
		_, _ = c.w.Write(c.body.Bytes())
	}
}
