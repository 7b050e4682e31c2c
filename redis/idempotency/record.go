package idempotency

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
)

// A record is what Redis holds for one key (in one scope, method and
// route): the first request's fingerprint, from the moment it arrived, and
// once a handler finished, its outcome.
type record struct {
	State  state       `json:"st"`
	FP     string      `json:"fp"`
	Status int         `json:"s,omitempty"`
	Header http.Header `json:"h,omitempty"`
	Append []string    `json:"a,omitempty"` // Header's fields whose values are added to a retry's own
	Reason string      `json:"r,omitempty"` // why a stateUnstored response was not stored
	Body   []byte      `json:"-"`
}

type state string

const (
	// stateProcessing: a request with the key arrived; whether a handler
	// runs is the lock's to say (none does once its holder is gone).
	stateProcessing state = "processing"
	// stateDone: the response is stored and replayed to retries.
	stateDone state = "done"
	// stateUnstored: the handler ran, but its response was too large,
	// streamed or hijacked: retries are refused, never run again.
	stateUnstored state = "unstored"
)

// encode lays a record out as a 4-byte length, its JSON metadata, then the
// raw body (no base64 for a 1 MiB body).
func (rec *record) encode() []byte {
	meta, _ := json.Marshal(rec) // strings, ints and a header map: never fails
	out := make([]byte, 4, 4+len(meta)+len(rec.Body))
	binary.BigEndian.PutUint32(out, uint32(len(meta)))
	out = append(out, meta...)
	return append(out, rec.Body...)
}

var errCorrupt = errors.New("idempotency: corrupt record")

func decode(b []byte) (*record, error) {
	if len(b) < 4 {
		return nil, errCorrupt
	}
	n := int(binary.BigEndian.Uint32(b))
	if n > len(b)-4 {
		return nil, errCorrupt
	}
	rec := &record{}
	if err := json.Unmarshal(b[4:4+n], rec); err != nil {
		return nil, errCorrupt
	}
	switch rec.State {
	case stateProcessing, stateUnstored:
	case stateDone:
		if !DefaultStoreStatus(rec.Status) {
			return nil, errCorrupt // WriteHeader would panic on it
		}
	default:
		return nil, errCorrupt
	}
	rec.Body = b[4+n:]
	return rec, nil
}
