package idempotency

import (
	"bytes"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/redfence/redfence/internal/httphdr"
	"github.com/redfence/redfence/internal/respcapture"
)

// capture is the ResponseWriter (respcapture.Writer) of the request that
// runs the handler. It buffers the response, which reaches the client only
// after it is stored (send): a client that sees an answer can count on a
// retry seeing the same one. A response that cannot be stored (a status
// past 599, past the max body, flushed, hijacked) is written through from
// then on, and its reason kept.
//
// The headers w had before the handler ran (Outer) were set by middleware
// outside, for this response alone (a request id, a session cookie), and
// none of their values is replayed, even in a field the handler added to.
type capture struct {
	*respcapture.Writer
	cfg respcapture.Config
}

func newCapture(w http.ResponseWriter, max int64) *capture {
	c := &capture{cfg: respcapture.Config{Name: "idempotency", Max: max, Refuse: refuseStatus}}
	c.Writer = respcapture.New(w, &c.cfg)
	return c
}

// refuseStatus keeps no response whose status net/http would not call one.
func refuseStatus(status int, _ http.Header) string {
	if status > 599 {
		return "status"
	}
	return ""
}

// stored returns the record of a response that may be stored, with the
// values the handler added to each header (never outer middleware's, even
// in a field both wrote, and never Set-Cookie, Set-Cookie2 or hop-by-hop
// ones unless replayable names them), and its body. A body that
// contradicts the handler's Content-Length is not.
func (c *capture) stored(fp string, replayable map[string]bool) *record {
	if c.Reason() != "" {
		return nil
	}
	header := c.Sent()
	rec := &record{State: stateDone, FP: fp, Status: c.Status(), Header: http.Header{}}
	drop := header.Clone()
	httphdr.DropHopByHop(drop)
	for k, v := range header {
		switch {
		case replayable[k]:
		case k == "Set-Cookie", k == "Set-Cookie2", drop[k] == nil, strings.HasPrefix(k, http.TrailerPrefix):
			continue
		}
		vals, appended := added(v, c.Outer()[k])
		if len(vals) == 0 {
			continue // outer middleware's, unchanged
		}
		rec.Header[k] = vals
		if appended {
			rec.Append = append(rec.Append, k)
		}
	}
	slices.Sort(rec.Append)
	if cl := header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(c.Body())) {
		c.SetReason("content-length")
		return nil
	}
	rec.Body = bytes.Clone(c.Body())
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
