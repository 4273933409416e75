package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/tokenwarden/tokenwarden/config"
)

// Who may use the usage API. With admin_token_file set, whoever sends
// the token; without it, whoever reaches the admin address, which by
// default is loopback only, and only loopback peers when the address is
// reachable from the network.

// authorized reports whether r carries token, or token is "" (none is
// set). The digests are compared, in constant time, so that neither the
// token nor its length leaks through timing.
func authorized(r *http.Request, token string) bool {
	if token == "" {
		return true
	}
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got, want := sha256.Sum256([]byte(strings.TrimSpace(tok))), sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

// loopbackOnly reports whether the usage API must refuse peers beyond
// loopback: the admin address is reachable from the network and no
// token is set, and a reset open to anyone who reaches the port would
// be a way around every limit.
func loopbackOnly(cfg *config.Config) bool {
	return cfg.AdminToken == "" && adminExposed(cfg.Admin)
}

// printAdminAPI says, for check-config, how the usage API is protected.
// It never prints the token.
func printAdminAPI(w io.Writer, cfg *config.Config) {
	const api = "usage API (/v1/ on the admin port): "
	switch {
	case cfg.AdminToken != "":
		fmt.Fprintf(w, "%sbearer token from %s\n", api, cfg.AdminTokenFile)
	case adminExposed(cfg.Admin):
		fmt.Fprintf(w, "%sno token, so it answers loopback clients only although admin %s is reachable beyond loopback (set admin_token_file to use it over the network)\n", api, cfg.Admin)
	default:
		fmt.Fprintf(w, "%sno token; loopback only\n", api)
	}
}

// adminExposed reports whether the admin address listens beyond the
// loopback interface.
func adminExposed(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return true
	}
	if host == "localhost" {
		return false
	}
	ip := net.ParseIP(host)
	return ip == nil || !ip.IsLoopback()
}

// browserReach reports why r cannot be an operator's own request to a
// usage API without a token, or "" when it can be. With no token, a
// peer on loopback is the only authority; a web page open in a browser
// on that host (an operator's laptop running kubectl port-forward) is
// such a peer too. A cross-site POST of a text/plain body needs no
// preflight, so any page could reset a counter; and a page whose name
// is rebound to 127.0.0.1 reads and resets as a same-origin one. Both
// show: browsers send Origin with every POST and Sec-Fetch-Site with
// every request, and a rebound page's Host names the attacker's domain,
// where curl and kubectl port-forward name localhost or a loopback
// address. A token needs none of this: a page cannot send it.
func browserReach(r *http.Request) string {
	if r.Header.Get("Origin") != "" {
		return "a request from a web page (it has an Origin header)"
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "none" {
		return "a request from a web page (Sec-Fetch-Site: " + truncate(site, 32) + ")"
	}
	if !loopbackHost(r.Host) {
		return "a request addressed to " + strconv.Quote(truncate(r.Host, 256)) + ", not to localhost or a loopback address"
	}
	return ""
}

// loopbackHost reports whether a request's Host names this host's
// loopback interface: localhost or a loopback address, with any port.
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]")
	}
	host = strings.TrimSuffix(host, ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// loopbackPeer reports whether a request's peer address is a loopback
// one: the process's own host, or kubectl port-forward, which connects
// from inside the pod. (A sidecar proxy that forwards from loopback makes
// every peer look local: set a token there.)
func loopbackPeer(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
