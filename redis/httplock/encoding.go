package httplock

import (
	"strconv"
	"strings"
)

// acceptsEncoding reports whether a request whose Accept-Encoding field has
// the values accept may be sent a response with the content codings in
// codings (its Content-Encoding values): every coding but identity must be
// accepted, by name or by "*", with a q-value above 0 (RFC 9110 §12.5.3).
//
// One departure from the RFC, which lets a request without Accept-Encoding
// take any coding: such a request accepts none. A client that did not ask
// for gzip is not given the gzip another client asked for; it calls the
// origin, which answers it as it would have without httplock.
func acceptsEncoding(accept, codings []string) bool {
	for _, field := range codings {
		for _, c := range strings.Split(field, ",") {
			if c = coding(c); c != "" && c != "identity" && !accepted(accept, c) {
				return false
			}
		}
	}
	return true
}

// accepted reports whether the Accept-Encoding values accept take coding c,
// not identity, in canonical form.
func accepted(accept []string, c string) bool {
	star := false
	for _, field := range accept {
		for _, item := range strings.Split(field, ",") {
			name, params, _ := strings.Cut(item, ";")
			switch coding(name) {
			case c:
				return qvalue(params) > 0 // named: that settles it, whatever "*" says
			case "*":
				star = qvalue(params) > 0
			}
		}
	}
	return star
}

// coding canonicalises a content-coding name: lower case, and the x- aliases
// of gzip and compress (RFC 9110 §8.4.1) by their names.
func coding(name string) string {
	name = strings.ToLower(strings.TrimSpace(name))
	switch name {
	case "x-gzip":
		return "gzip"
	case "x-compress":
		return "compress"
	}
	return name
}

// qvalue returns the weight among an Accept-Encoding item's parameters: 1
// when there is none, 0 when it does not parse (refusing is the safe reading
// of a weight we cannot read).
func qvalue(params string) float64 {
	for _, p := range strings.Split(params, ";") {
		name, v, _ := strings.Cut(strings.TrimSpace(p), "=")
		if !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || q < 0 || q > 1 {
			return 0
		}
		return q
	}
	return 1
}
