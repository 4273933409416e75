package main

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
)

// TestUsageAPIRefusesWebPages: without a token, the usage API's only
// authority is a loopback peer, and a web page in a browser on that host
// is one. A cross-site form or fetch POST (text/plain, no preflight) and
// a DNS-rebound page (same origin, Host names the attacker's domain) must
// neither read nor reset; curl and port-forward to localhost still do.
func TestUsageAPIRefusesWebPages(t *testing.T) {
	const reset = `{"scope":{"tenant":"acme","user":"u2"}}`
	tests := []struct {
		name   string
		token  string
		method string
		target string
		host   string
		header []string
		status int
	}{
		{"cross-site POST of a reset", "", "POST", "/v1/limits/user-tpm/reset", "localhost:9090",
			[]string{"Origin", "https://evil.example", "Content-Type", "text/plain", "Sec-Fetch-Site", "cross-site"}, 403},
		{"cross-site POST, Origin only", "", "POST", "/v1/limits/user-tpm/reset", "127.0.0.1:9090",
			[]string{"Origin", "null"}, 403},
		{"rebound page resets", "", "POST", "/v1/limits/user-tpm/reset", "evil.example:9090",
			[]string{"Origin", "http://evil.example:9090", "Sec-Fetch-Site", "same-origin"}, 403},
		{"rebound page reads, no Origin", "", "GET", "/v1/usage?tenant=acme", "evil.example:9090", nil, 403},
		{"rebound page reads, fetch metadata only", "", "GET", "/v1/usage?tenant=acme", "localhost:9090",
			[]string{"Sec-Fetch-Site", "same-origin"}, 403},
		{"curl to localhost", "", "GET", "/v1/usage?tenant=acme", "localhost:9090", nil, 200},
		{"curl to 127.0.0.1", "", "GET", "/v1/usage?tenant=acme", "127.0.0.1:9090", nil, 200},
		{"curl to [::1]", "", "GET", "/v1/usage?tenant=acme", "[::1]:9090", nil, 200},
		{"address bar (Sec-Fetch-Site none)", "", "GET", "/v1/usage?tenant=acme", "localhost:9090",
			[]string{"Sec-Fetch-Site", "none"}, 200},
		{"a token is authority whatever the Host", "tok", "POST", "/v1/limits/user-tpm/reset", "tokenwarden.internal:9090",
			[]string{"Authorization", "Bearer tok"}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newUsageFixture(t, memstore.New(memstore.Options{}), tt.token)
			body := ""
			if tt.method == "POST" {
				body = reset
			}
			req := httptest.NewRequest(tt.method, tt.target, strings.NewReader(body))
			req.RemoteAddr, req.Host = "127.0.0.1:40000", tt.host
			for i := 0; i+1 < len(tt.header); i += 2 {
				req.Header.Set(tt.header[i], tt.header[i+1])
			}
			rec := httptest.NewRecorder()
			f.handler.ServeHTTP(rec, req)
			if rec.Code != tt.status {
				t.Fatalf("got %d %s, want %d", rec.Code, rec.Body, tt.status)
			}
			u, err := f.limiter.CounterUsage(t.Context(), "user-tpm", accounting.Attributes{{Name: "tenant", Value: "acme"}, {Name: "user", Value: "u2"}})
			if err != nil {
				t.Fatal(err)
			}
			want := int64(300)
			if tt.method == "POST" && tt.status == 200 {
				want = 0
			}
			if u.Used != want {
				t.Errorf("u2's counter after the request: got used %d, want %d", u.Used, want)
			}
		})
	}
}

func TestLoopbackHost(t *testing.T) {
	tests := []struct {
		host string
		want bool
	}{
		{"localhost", true}, {"localhost:9090", true}, {"LOCALHOST.:9090", true}, {"127.0.0.1:9090", true},
		{"127.8.9.10", true}, {"[::1]:9090", true}, {"[::1]", true}, {"[::ffff:127.0.0.1]:9090", true},
		{"", false}, {"evil.example:9090", false}, {"localhost.evil.example", false}, {"10.0.0.1:9090", false},
		{"[::2]:9090", false}, {"0.0.0.0:9090", false},
	}
	for _, tt := range tests {
		if got := loopbackHost(tt.host); got != tt.want {
			t.Errorf("loopbackHost(%q): got %v, want %v", tt.host, got, tt.want)
		}
	}
}
