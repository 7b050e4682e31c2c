package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
)

// parseKey reads the Idempotency-Key field: 1 to maxLen visible ASCII
// characters, bare (a UUID as most client SDKs send it) or as the RFC 8941
// String the draft defines, in double quotes; both forms name the same key
// (abc and "abc"). present is false when there is no field. A field the
// parser does not take is an error saying why and what is accepted, sent to
// the client in the 400's detail.
func parseKey(values []string, maxLen int) (key string, present bool, err error) {
	if len(values) == 0 {
		return "", false, nil
	}
	if len(values) > 1 {
		return "", true, errors.New("more than one Idempotency-Key field")
	}
	v := trimSP(values[0])
	switch {
	case v == "":
		err = errors.New("empty Idempotency-Key")
	case v[0] == '"':
		key, err = parseString(v)
	default:
		key, err = parseBare(v)
	}
	if err == nil && (key == "" || len(key) > maxLen) {
		err = fmt.Errorf("Idempotency-Key has %d characters", len(key))
	}
	if err != nil {
		return "", true, fmt.Errorf("%w; a key is 1 to %d visible ASCII characters (a UUID, say), bare or in double quotes", err, maxLen)
	}
	return key, true, nil
}

// parseBare takes a key sent without quotes: visible ASCII only, so that
// no space, control byte or non-ASCII character is part of a key.
func parseBare(v string) (string, error) {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x21 || c > 0x7e {
			return "", fmt.Errorf("Idempotency-Key: byte 0x%02x is not visible ASCII", c)
		}
	}
	return v, nil
}

// trimSP drops the spaces RFC 8941 lets surround a field value (net/http
// has dropped tabs and other whitespace already).
func trimSP(s string) string {
	for len(s) > 0 && s[0] == ' ' {
		s = s[1:]
	}
	for len(s) > 0 && s[len(s)-1] == ' ' {
		s = s[:len(s)-1]
	}
	return s
}

// parseString parses an sf-string that is the whole field: printable
// ASCII between double quotes, `\"` and `\\` the only escapes (RFC 8941
// §4.2.5). Parameters (`"k";a=1`) are refused: the draft defines none.
func parseString(v string) (string, error) {
	var b []byte
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i == len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", errors.New(`Idempotency-Key: a backslash escapes only '"' or '\'`)
			}
			b = append(b, v[i])
		case c == '"':
			if i != len(v)-1 {
				return "", errors.New("Idempotency-Key: nothing may follow the closing quote (no parameters)")
			}
			return string(b), nil
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("Idempotency-Key: byte 0x%02x is not printable ASCII", c)
		default:
			b = append(b, c)
		}
	}
	return "", errors.New("Idempotency-Key: no closing quote")
}

// writeParts hashes each part with its length first, so that no two lists
// of parts hash alike ("a","bc" and "ab","c" differ).
func writeParts(h hash.Hash, parts ...string) {
	var n [8]byte
	for _, p := range parts {
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
}

// recordID names a key's record: the SHA-256 of scope and key,
// unambiguously joined, in hex. A key names one operation of one client
// (the draft's rule): reused with another method, path or payload it meets
// the first request's fingerprint and is refused, never a second run. A
// client can choose the key, never the scope, so a guessed key never
// reaches another scope's record.
func recordID(scope, key string) string {
	h := sha256.New()
	writeParts(h, "redfence/idempotency/v2", scope, key)
	return hex.EncodeToString(h.Sum(nil))
}

// fingerprint is the SHA-256 of what makes two requests with one key the
// same request: method, path, query, the chosen headers (every value, in
// order) and the body when it is fingerprinted.
func fingerprint(r *http.Request, headers []string, body []byte, withBody bool) string {
	h := sha256.New()
	writeParts(h, r.Method, sentPath(r), r.URL.RawQuery)
	for _, name := range headers {
		vs := r.Header.Values(name)
		writeParts(h, name, fmt.Sprint(len(vs)))
		writeParts(h, vs...)
	}
	if withBody {
		sum := sha256.Sum256(body)
		writeParts(h, "body", string(sum[:]))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// sentPath is the path the client sent (escaped), from r.RequestURI, which
// http.StripPrefix leaves as it was: requests to /billing/orders and
// /shipping/orders stay apart behind StripPrefix. r.URL's path when there
// is none (a request made in a test, or the "*" and authority forms).
func sentPath(r *http.Request) string {
	if u, err := url.ParseRequestURI(r.RequestURI); err == nil && u.Path != "" {
		return u.EscapedPath()
	}
	return r.URL.EscapedPath()
}

var errBodyTooLarge = errors.New("request body too large")

// readBody reads r's body, up to max bytes, and gives the handler a copy
// it can read from the start.
func readBody(r *http.Request, max int64) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > max {
		return nil, errBodyTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, errBodyTooLarge
	}
	_ = r.Body.Close()
	r.Body = io.NopCloser(bytes.NewReader(b))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	r.ContentLength = int64(len(b))
	return b, nil
}
