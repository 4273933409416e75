package extproc_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/extproc"
	"github.com/tokenwarden/tokenwarden/internal/envoytest"
)

// contractLimit holds each tenant to the tokens its "tpm" attribute
// names: 1500 without one, at most 4000.
var contractLimit = accounting.Limit{Name: "contract-tpm", Dimension: accounting.Tokens, Scope: []string{"tenant"},
	Algorithm: accounting.FixedWindow, Limit: 1500, Window: time.Hour,
	From: &accounting.LimitFrom{Attribute: "tpm", Ceiling: 4000}}

// TestLimitValueFromHeader: each tenant is admitted up to the value its
// header names, bounded by the ceiling; without the header, or with one
// that is not an amount, the limit's own value holds. The 429 and the
// rate-limit headers state the value the tenant was held to.
func TestLimitValueFromHeader(t *testing.T) {
	r := newRig(t, []accounting.Limit{contractLimit}, withServer(func(o *extproc.Options) {
		o.Identity.Attributes = append(o.Identity.Attributes, extproc.AttributeSource{Name: "tpm", Header: "x-tpm"})
	}))
	tests := []struct {
		tenant, tpm string // tpm "": no header
		admitted    int    // requests admitted before the 429
		limit       int64
	}{
		{"contracted", "2500", 2, 2500},
		{"none", "", 1, 1500},
		{"garbage", "lots", 1, 1500},
		{"negative", "-2500", 1, 1500},
		{"fractional", "2500.5", 1, 1500},
		{"greedy", "999999999999999999999999", 3, 4000},
	}
	for _, tt := range tests {
		t.Run(tt.tenant, func(t *testing.T) {
			req := chatRequest(tt.tenant, contractChat)
			if tt.tpm != "" {
				req.Headers = append(req.Headers, [2]string{"x-tpm", tt.tpm})
			}
			wantHeldTo(t, r, req, tt.admitted, tt.limit)
			if got := r.usedAt(t, contractLimit, tt.tenant); got != int64(tt.admitted)*1200 {
				t.Errorf("tokens used: got %d, want %d", got, tt.admitted*1200)
			}
		})
	}
}

// TestLimitValueFromJWTClaim: a numeric claim of a verified JWT, as
// Envoy's jwt_authn forwards it, is a limit value like a header's.
func TestLimitValueFromJWTClaim(t *testing.T) {
	jwt := func(path string) *extproc.MetadataSource {
		return &extproc.MetadataSource{Namespace: "envoy.filters.http.jwt_authn", Key: "payload", Path: []string{path}}
	}
	r := newRig(t, []accounting.Limit{contractLimit}, withServer(func(o *extproc.Options) {
		o.Identity = extproc.Identity{Attributes: []extproc.AttributeSource{
			{Name: "tenant", Metadata: jwt("org")}, {Name: "tpm", Metadata: jwt("tpm")}}}
	}))
	payload, _ := structpb.NewStruct(map[string]any{"org": "acme", "tpm": 2500})
	req := chatRequest("ignored", contractChat)
	req.Metadata = &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
		"envoy.filters.http.jwt_authn": {Fields: map[string]*structpb.Value{"payload": structpb.NewStructValue(payload)}},
	}}
	wantHeldTo(t, r, req, 2, 2500)
}

// contractChat reserves about 1010 tokens; the upstream below reports 1200.
var contractChat = []byte(`{"model":"gpt-4o-mini","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`)

// wantHeldTo sends req until it is refused: admitted requests first
// (each charged 1200), then a 429 that states limit.
func wantHeldTo(t *testing.T, r *rig, req envoytest.Request, admitted int, limit int64) {
	t.Helper()
	usage := jsonUpstream(200, []byte(`{"choices":[],"usage":{"prompt_tokens":200,"completion_tokens":1000,"total_tokens":1200}}`))
	for range admitted {
		resp := r.envoy.Do(t.Context(), req, usage)
		wantStatus(t, resp, 200)
		wantHeader(t, resp.Header, "x-ratelimit-limit-tokens", strconv.FormatInt(limit, 10))
	}
	resp := r.envoy.Do(t.Context(), req, nil)
	wantStatus(t, resp, 429)
	wantHeader(t, resp.Header, "x-tokenwarden-limit", "contract-tpm")
	wantHeader(t, resp.Header, "x-ratelimit-limit-tokens", strconv.FormatInt(limit, 10))
	if msg := decodeError(t, resp.Body).Error.Message; !strings.Contains(msg, "limit "+strconv.FormatInt(limit, 10)+" per") {
		t.Errorf("429 message %q does not state the limit %d", msg, limit)
	}
}

// usedAt returns what limit l's counter for tenant holds, whatever value
// the limit has for it: the probe asks at the ceiling.
func (r *rig) usedAt(t *testing.T, l accounting.Limit, tenant string) int64 {
	t.Helper()
	l.Limit = l.From.Ceiling
	res, err := r.store.Reserve(t.Context(), accounting.ReserveRequest{
		ID: "probe", Items: []accounting.ReserveItem{{Counter: l.Counter(accounting.Attributes{{Name: "tenant", Value: tenant}}), Amount: 0}},
	})
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	return l.Limit - res.States[0].Remaining
}
