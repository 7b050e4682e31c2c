// Package respcapture is the ResponseWriter that httplock and idempotency
// put in front of a handler: it buffers the response, so that the
// middleware keeps it (shares it, stores it) before any client sees it,
// and writes through from the moment it cannot be kept: past the size
// bound, flushed, hijacked, or a status line the middleware refuses.
//
// Only what the handler wrote is kept. The headers the ResponseWriter had
// before the handler ran (Outer) were set by middleware outside, for this
// response alone (a request id, a session cookie).
package respcapture

import (
	"bufio"
	"bytes"
	"errors"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"

	"github.com/redfence/redfence/internal/httphdr"
)

// Config is what a middleware decides for its Writers.
type Config struct {
	Name string // prefixes the Writer's own errors: "httplock"
	Max  int64  // the most body bytes buffered

	// Refuse returns why a response with this status line cannot be kept,
	// "" when it can; it is asked at the status line. Nil keeps any.
	Refuse func(status int, h http.Header) string
	// Lost, when set, is called once, before anything reaches the client,
	// as the response is found not to be kept.
	Lost func()
	// Quiet hides failed writes to the client from the handler (ClientErr
	// has the first): the handler must finish a response others wait for,
	// and many stop at the first write error.
	Quiet bool
}

// Writer buffers one handler's response. It is an http.ResponseWriter, an
// http.Flusher and an http.Hijacker, and unwraps to w for
// http.ResponseController's deadlines.
type Writer struct {
	w       http.ResponseWriter
	cfg     *Config
	outer   http.Header // w's headers before the handler ran, canonical
	status  int
	header  http.Header // as of the status line, canonical
	body    bytes.Buffer
	reason  string // why the response is not kept; "" while it may be
	through bool   // the status line went to the client: writes go through
	client  error  // the first failed write to the client
}

// New returns a Writer in front of w; cfg must outlive it.
func New(w http.ResponseWriter, cfg *Config) *Writer {
	return &Writer{w: w, cfg: cfg, outer: httphdr.Canonical(w.Header())}
}

func (c *Writer) Header() http.Header { return c.w.Header() }

func (c *Writer) WriteHeader(code int) {
	if c.status != 0 {
		return // net/http ignores superfluous calls; so do we
	}
	if code < 100 || code > 999 {
		c.status = code
		c.WriteThrough("status") // net/http panics on a bad code, as it would without us
		return
	}
	if code < 200 && code != http.StatusSwitchingProtocols {
		c.w.WriteHeader(code) // informational: more headers follow
		return
	}
	c.status = code
	c.header = httphdr.Canonical(c.w.Header())
	if c.cfg.Refuse != nil {
		if reason := c.cfg.Refuse(code, c.header); reason != "" {
			c.WriteThrough(reason) // nothing to wait for: the client gets it as it comes
		}
	}
}

func (c *Writer) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	if !c.through {
		if int64(c.body.Len()+len(p)) <= c.cfg.Max {
			return c.body.Write(p)
		}
		c.WriteThrough("oversize")
	}
	return c.send(p)
}

// WriteThrough gives up keeping the response, for reason: Lost is called,
// then the status line and what was buffered are sent, and from then on
// writes go to the client. The first reason given is the one kept.
func (c *Writer) WriteThrough(reason string) {
	if c.reason == "" {
		c.reason = reason
	}
	if c.through {
		return
	}
	c.through = true
	if c.cfg.Lost != nil {
		c.cfg.Lost()
	}
	if c.status != 0 {
		c.w.WriteHeader(c.status)
	}
	if c.body.Len() > 0 {
		_, _ = c.send(c.body.Bytes())
	}
	c.body = bytes.Buffer{}
}

// send writes p to the client. A body longer than the handler's
// Content-Length is no response to keep either.
func (c *Writer) send(p []byte) (int, error) {
	if c.client != nil && c.cfg.Quiet {
		return len(p), nil
	}
	n, err := c.w.Write(p)
	if err != nil {
		if c.client == nil {
			c.client = err
		}
		if errors.Is(err, http.ErrContentLength) && c.reason == "" {
			c.reason = "content-length"
		}
		if c.cfg.Quiet {
			return len(p), nil
		}
	}
	return n, err
}

// Flush streams: a stream is not kept (the others would get it only whole,
// and streams are often endless).
func (c *Writer) Flush() {
	if c.status == 0 {
		c.WriteHeader(http.StatusOK)
	}
	c.WriteThrough("streamed")
	if f, ok := c.w.(http.Flusher); ok {
		f.Flush()
	}
}

// Hijack hands the connection to the handler; nothing is kept.
func (c *Writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := c.w.(http.Hijacker)
	if !ok {
		c.WriteThrough("hijacked")
		return nil, nil, errors.New(c.cfg.Name + ": the underlying ResponseWriter cannot hijack")
	}
	// Nothing buffered may be written to a hijacked connection: what the
	// handler wrote before is lost, as net/http would lose it.
	if !c.through && c.cfg.Lost != nil {
		c.cfg.Lost()
	}
	c.reason, c.through = "hijacked", true
	return h.Hijack()
}

// Unwrap lets http.ResponseController reach the connection's writer for
// deadlines; its Flush and Hijack stop at the Writer's own.
func (c *Writer) Unwrap() http.ResponseWriter { return c.w }

// Finish settles a handler that wrote nothing: net/http sends 200, empty.
func (c *Writer) Finish() {
	if c.status == 0 {
		c.status = http.StatusOK
		c.header = httphdr.Canonical(c.w.Header())
	}
}

// Status, Sent, Body and Outer are the response as the handler wrote it:
// its status, its headers as of the status line, the buffered body, and
// the headers outer middleware had set before; they are read-only. Through
// says it went to the client, Reason why it is not kept ("" while it may
// be; SetReason gives one), ClientErr the first failed write to the client.
func (c *Writer) Status() int             { return c.status }
func (c *Writer) Sent() http.Header       { return c.header }
func (c *Writer) Body() []byte            { return c.body.Bytes() }
func (c *Writer) Outer() http.Header      { return c.outer }
func (c *Writer) Through() bool           { return c.through }
func (c *Writer) Reason() string          { return c.reason }
func (c *Writer) ClientErr() error        { return c.client }
func (c *Writer) SetReason(reason string) { c.reason = reason }

// Replay sends the buffered response to the client once it is kept: the
// headers as they were at the status line (net/http ignores later changes)
// with the trailers set later (those of a name the Trailer header declared,
// and http.TrailerPrefix ones), then the body. It blocks as long as the
// client does not read, and does nothing once the response went through.
func (c *Writer) Replay() {
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
		_, _ = c.send(c.body.Bytes())
	}
}

// Reset puts w's headers back as outer middleware left them, before the
// request is answered with something other than the handler's response:
// the handler's headers (a secret, its Content-Length) are not that
// answer's.
func (c *Writer) Reset() {
	dst := c.w.Header()
	clear(dst)
	for k, v := range c.outer {
		dst[k] = slices.Clone(v)
	}
}
