package httplock

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"io"
	"net/http"
)

// conditional are the request headers that make a response about one
// client's copy or one part of it (RFC 9110 §13, §14.2): a 304, 412 or 206
// answers that request only.
var conditional = []string{"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "If-Range", "Range"}

// overrides are the request headers with which frameworks and proxies let a
// request stand for another URL or method than the one in the key.
var overrides = []string{"X-Original-Url", "X-Rewrite-Url", "X-Http-Method-Override", "X-Http-Method", "X-Method-Override"}

// ineligible says why r must not be collapsed, or "".
func (h *handler) ineligible(r *http.Request) string {
	switch {
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		return "method"
	case r.ContentLength != 0 || len(r.TransferEncoding) > 0:
		return "body" // what the origin may read is not in the key
	case !h.cfg.shareAuth && (hasAny(r.Header, h.cfg.credentials) || clientCert(r)):
		return "credentials"
	case hasAny(r.Header, conditional):
		return "conditional"
	case hasAny(r.Header, overrides):
		return "override"
	case reload(r.Header):
		return "reload"
	case len(r.Header["Upgrade"]) > 0:
		return "upgrade"
	}
	return ""
}

// clientCert reports whether r came with a client certificate (mutual
// TLS): an identity, as a credential header is.
func clientCert(r *http.Request) bool {
	return r.TLS != nil && len(r.TLS.PeerCertificates) > 0
}

// reload reports whether the request asks for a response the origin makes
// for it (RFC 9111 §5.2.1): Cache-Control no-cache or max-age=0, or Pragma
// no-cache. A shared one would not be that.
func reload(h http.Header) bool {
	if hasDirective(h["Pragma"], "no-cache") {
		return true
	}
	for _, d := range directives(h["Cache-Control"]) {
		if d.name == "no-cache" || d.name == "max-age" && d.seconds() == 0 {
			return true
		}
	}
	return false
}

// hasAny reports whether h has any of names (canonical), even empty: a
// header's presence is enough to make a request its sender's own.
func hasAny(h http.Header, names []string) bool {
	for _, name := range names {
		if len(h[name]) > 0 {
			return true
		}
	}
	return false
}

// key is a hash of everything that makes two requests identical: the
// namespace, the method, whether the connection is TLS, the request target
// (scheme when the request line has one, path and query), the key headers
// (Host and the forwarding headers unless taken out, then WithVary's) and
// the WithKey part. Every field is written with its length, and every header
// with its count of values, so that no two different requests write the same
// bytes.
func (h *handler) key(r *http.Request) string {
	k := keyHash{h: sha256.New()}
	k.field(h.cfg.namespace)
	k.field(r.Method)
	if r.TLS != nil {
		k.field("tls")
	} else {
		k.field("")
	}
	k.field(r.URL.Scheme)
	k.field(r.URL.RequestURI())
	for _, name := range h.cfg.keyed {
		vs := r.Header[name]
		if name == "Host" {
			vs = []string{r.Host}
		}
		k.field(name)
		k.count(len(vs))
		for _, v := range vs {
			k.field(v)
		}
	}
	if h.cfg.key != nil {
		k.field(h.cfg.key(r))
	}
	return hex.EncodeToString(k.h.Sum(nil)[:16])
}

type keyHash struct {
	h   hash.Hash
	buf [8]byte
}

func (k *keyHash) count(n int) {
	binary.BigEndian.PutUint64(k.buf[:], uint64(n))
	k.h.Write(k.buf[:])
}

func (k *keyHash) field(v string) {
	k.count(len(v))
	_, _ = io.WriteString(k.h, v)
}
