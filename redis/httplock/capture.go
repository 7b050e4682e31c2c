package httplock

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/redfence/redfence/internal/httphdr"
	"github.com/redfence/redfence/internal/respcapture"
)

// capture is the leader's ResponseWriter (respcapture.Writer). While the
// response may still be shared it only buffers: the response is stored and
// announced first, and sent to the leader's own client after (Replay), so a
// client that does not read cannot hold up the requests waiting on it. Once
// the response cannot be shared (a status or header the policy refuses,
// past the max body, a flush or a hijack) unshared is called, before
// anything reaches the client, and the rest is written through.
//
// The headers w already had when the handler started were set by
// middleware outside httplock (a request id, the role header): each
// follower has its own, so they stay with the leader's response.
//
// Writes to the client that fail (the leader's client went away) are not
// reported to the handler: it must finish the response for the followers.
type capture struct {
	*respcapture.Writer
	r   *http.Request
	cfg respcapture.Config
}

func newCapture(w http.ResponseWriter, r *http.Request, max int64, policy func(int, http.Header) string, unshared func()) *capture {
	c := &capture{r: r, cfg: respcapture.Config{Name: "httplock", Max: max, Refuse: policy, Lost: unshared, Quiet: true}}
	c.Writer = respcapture.New(w, &c.cfg)
	return c
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
	c.Finish()
	status, header := c.Status(), c.Sent()
	if c.Reason() != "" || c.cfg.Refuse(status, header) != "" {
		return nil
	}
	var body []byte
	if bodyAllowed(c.r.Method, status) {
		if !contentLengthMatches(header, len(c.Body())) {
			return nil
		}
		body = bytes.Clone(c.Body())
	}
	ttl := shareFor(header, window)
	if ttl < time.Millisecond {
		return nil
	}
	sent := header.Clone()
	httphdr.DropHopByHop(sent)
	h := http.Header{}
	for k, v := range sent {
		if !slices.Equal(v, c.Outer()[k]) {
			h[k] = v
		}
	}
	if roleHeader != "" {
		h.Del(roleHeader)
	}
	e := &entry{Kind: kindResponse, Status: status, Header: h, Body: body, ttl: ttl}
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
