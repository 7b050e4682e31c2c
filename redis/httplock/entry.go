package httplock

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"time"
)

// An entry is a response a leader leaves in Redis for the others, for the
// share window. Nothing else is left there: an answer that is not shared
// and a panic reach only the requests waiting at the time (by publication).
type entry struct {
	Kind   kind              `json:"k"`
	Status int               `json:"s,omitempty"`
	Header http.Header       `json:"h,omitempty"`
	Vary   map[string]string `json:"v,omitempty"` // digests of the leader's values of the headers its response varies on (varyDigest)
	Body   []byte            `json:"-"`

	ttl time.Duration // how long it is kept: the share window, or less (shareFor)
}

type kind string

// kindResponse is the only kind an entry has. Replicas of earlier versions
// also left markers ("noshare", "panic") for the whole share window; they
// are read as corrupt, that is as no entry.
const kindResponse kind = "response"

// matches reports whether r may be served this response: it sent the same
// values for every header the response varies on, and it accepts the
// response's content coding (whether or not the origin said Vary:
// Accept-Encoding).
func (e *entry) matches(r *http.Request) bool {
	for h, v := range e.Vary {
		if varyDigest(r.Header.Values(h)) != v {
			return false
		}
	}
	return acceptsEncoding(r.Header.Values("Accept-Encoding"), e.Header.Values("Content-Encoding"))
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

// storable reports whether an entry may have status: a final status, not
// one that answers a condition or a range (see notShareable).
func storable(status int) bool {
	return status >= 200 && status <= 599 && status != http.StatusPartialContent &&
		status != http.StatusNotModified && status != http.StatusPreconditionFailed
}

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
	if e.Kind != kindResponse || !storable(e.Status) {
		return nil, errCorrupt // a status no leader stores would make WriteHeader panic, or answer a condition
	}
	e.Body = b[4+n:]
	return e, nil
}
