package httplock

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// An entry is what a leader leaves in Redis for the others: a response, or a
// marker that says there is none to share.
type entry struct {
	Kind   kind              `json:"k"`
	Status int               `json:"s,omitempty"`
	Header http.Header       `json:"h,omitempty"`
	Vary   map[string]string `json:"v,omitempty"` // the leader's values of the headers its response varies on
	Body   []byte            `json:"-"`
}

type kind string

const (
	kindResponse kind = "response" // share it
	kindNoShare  kind = "noshare"  // go to the origin, all at once
	kindPanic    kind = "panic"    // the leader panicked; answer with the panic status
)

// matches reports whether r may be served this response: it sent the same
// values for every header the response varies on.
func (e *entry) matches(r *http.Request) bool {
	for h, v := range e.Vary {
		if strings.Join(r.Header.Values(h), ", ") != v {
			return false
		}
	}
	return true
}

// encode lays an entry out as a 4-byte length, its JSON metadata, then the
// raw body (so a 1 MiB body is not base64-inflated).
func (e *entry) encode() ([]byte, error) {
	meta, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 4, 4+len(meta)+len(e.Body))
	binary.BigEndian.PutUint32(out, uint32(len(meta)))
	out = append(out, meta...)
	return append(out, e.Body...), nil
}

var errCorrupt = errors.New("httplock: corrupt shared entry")

func decode(b []byte) (*entry, error) {
	if len(b) < 4 {
		return nil, errCorrupt
	}
	n := int(binary.BigEndian.Uint32(b))
	if n > len(b)-4 {
		return nil, errCorrupt
	}
	e := &entry{}
	if err := json.Unmarshal(b[4:4+n], e); err != nil {
		return nil, errCorrupt
	}
	switch e.Kind {
	case kindResponse, kindNoShare, kindPanic:
	default:
		return nil, errCorrupt
	}
	e.Body = b[4+n:]
	return e, nil
}

// hopByHop are the headers that describe one connection, never a response
// (RFC 9110 §7.6.1), plus Set-Cookie's partner in crime, none here.
var hopByHop = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func dropHopByHop(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopByHop {
		h.Del(name)
	}
}

// notShareable returns why a captured response may not be shared, or "".
func notShareable(status int, h http.Header, shareStatus func(int) bool) string {
	switch {
	case !shareStatus(status):
		return "status"
	case len(h.Values("Set-Cookie")) > 0:
		return "set-cookie"
	case len(h.Values("Trailer")) > 0:
		return "trailers"
	}
	for _, v := range h.Values("Cache-Control") {
		for _, d := range strings.Split(v, ",") {
			d = strings.ToLower(strings.TrimSpace(d))
			if name, _, _ := strings.Cut(d, "="); name == "no-store" || name == "private" {
				return "cache-control"
			}
		}
	}
	for _, v := range h.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			if strings.TrimSpace(f) == "*" {
				return "vary"
			}
		}
	}
	return ""
}
