package llm

import (
	"path"
	"strings"
)

// CleanPath returns the path of a request's :path header the way an
// upstream's router sees it: the query string removed, every
// percent-escape decoded (%2F and %3A included: most HTTP frameworks
// decode the whole path before they route it, and Google's front end
// decodes ":generateContent"), dot segments and repeated slashes
// resolved, and no trailing slash. An escape that is not valid (%zz, a
// lone %) is kept as it is, as lenient servers keep it.
//
// Every decision tokenwarden takes on a path — which API it calls, which
// model it names — is taken on CleanPath's result, decoded exactly once
// from the raw path: classifying the raw path would let
// /v1beta/models/m%3AgenerateContent reach an upstream that serves it as
// generateContent while tokenwarden counted it as some other request,
// and decoding twice would read %253A as ':' where the upstream reads
// "%3A".
func CleanPath(raw string) string {
	if i := strings.IndexAny(raw, "?#"); i >= 0 {
		raw = raw[:i]
	}
	if raw == "" || raw[0] != '/' {
		raw = "/" + raw
	}
	if !needsCleaning(raw) {
		return raw
	}
	return path.Clean(unescape(raw))
}

// needsCleaning reports whether p holds anything CleanPath changes: an
// escape, a dot segment, a repeated or trailing slash. Most paths hold
// none, and are returned without an allocation.
func needsCleaning(p string) bool {
	if len(p) > 1 && p[len(p)-1] == '/' {
		return true
	}
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '%':
			return true
		case '/':
			if i+1 < len(p) && (p[i+1] == '/' || p[i+1] == '.') {
				return true
			}
		}
	}
	return false
}

// unescape decodes every valid %XX in s and keeps invalid ones verbatim
// (net/url's PathUnescape refuses the whole path instead).
func unescape(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b.WriteByte(hi<<4 | lo)
				i += 2
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
