package envoy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"flag"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jwtauthnv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/jwt_authn/v3"
)

// updateDemoTokens rewrites envoy/demo-jwt/*.jwt:
//
//	go test ./envoy -run TestDemoTokens -update-demo-tokens
var updateDemoTokens = flag.Bool("update-demo-tokens", false, "rewrite envoy/demo-jwt/*.jwt from the demo signing key")

// demoKeyFile is the demo signing key, public on purpose (see its header).
const demoKeyFile = "demo-jwt/signing-key.DEMO-ONLY.pem"

// demoClaims are the identities of the checked-in demo tokens, by file name.
var demoClaims = map[string]map[string]any{
	"acme.jwt":   {"tenant": "acme", "sub": "alice", "tier": "free"},
	"globex.jwt": {"tenant": "globex", "sub": "bob", "tier": "pro"},
}

// demoProvider returns the JWT provider of envoy.yaml (there is exactly one).
func demoProvider(t *testing.T) *jwtauthnv3.JwtProvider {
	t.Helper()
	var ja jwtauthnv3.JwtAuthentication
	httpFilter(t, hcmOf(t, loadBootstrap(t, "envoy.yaml"), "llm"), jwtFilter, &ja)
	for _, p := range ja.GetProviders() {
		return p
	}
	t.Fatal("no JWT provider in envoy.yaml")
	return nil
}

// demoSigningKey reads the checked-in demo key.
func demoSigningKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	block, _ := pem.Decode(readFile(t, demoKeyFile))
	if block == nil {
		t.Fatalf("%s: no PEM block", demoKeyFile)
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", demoKeyFile, err)
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		t.Fatalf("%s: got a %T, want an ECDSA key", demoKeyFile, k)
	}
	return ec
}

// jwks is the subset of a JSON Web Key Set the demo uses.
type jwks struct {
	Keys []struct {
		Kty, Crv, Alg, Kid, X, Y string
	} `json:"keys"`
}

var b64 = base64.RawURLEncoding

// mintDemoToken signs an ES256 JWT for the demo provider of envoy.yaml with the
// given extra claims (e.g. tenant, sub, tier). Tests use it to call Envoy as any
// identity; the tokens carry no expiry.
func mintDemoToken(t *testing.T, claims map[string]any) string {
	t.Helper()
	p := demoProvider(t)
	var set jwks
	if err := json.Unmarshal([]byte(p.GetLocalJwks().GetInlineString()), &set); err != nil || len(set.Keys) == 0 {
		t.Fatalf("inline JWKS: %v", err)
	}
	all := map[string]any{"iss": p.GetIssuer()}
	if len(p.GetAudiences()) > 0 {
		all["aud"] = p.GetAudiences()[0]
	}
	for k, v := range claims {
		all[k] = v
	}
	header, _ := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT", "kid": set.Keys[0].Kid})
	payload, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	input := b64.EncodeToString(header) + "." + b64.EncodeToString(payload)
	sum := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, demoSigningKey(t), sum[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64) // JWS ES256: r and s as 32-byte big-endian halves
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + b64.EncodeToString(sig)
}

// verifyDemoToken checks token's ES256 signature against the inline JWKS of
// envoy.yaml and returns its claims.
func verifyDemoToken(t *testing.T, token string) map[string]any {
	t.Helper()
	var set jwks
	if err := json.Unmarshal([]byte(demoProvider(t).GetLocalJwks().GetInlineString()), &set); err != nil || len(set.Keys) != 1 {
		t.Fatalf("inline JWKS: got %d keys (%v), want 1", len(set.Keys), err)
	}
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		t.Fatalf("got %d JWT parts, want 3", len(parts))
	}
	x, errX := b64.DecodeString(set.Keys[0].X)
	y, errY := b64.DecodeString(set.Keys[0].Y)
	sig, errS := b64.DecodeString(parts[2])
	if errX != nil || errY != nil || errS != nil || len(sig) != 64 {
		t.Fatalf("decoding key or signature: %v %v %v (signature %d bytes, want 64)", errX, errY, errS, len(sig))
	}
	pub := &ecdsa.PublicKey{Curve: elliptic.P256(), X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(pub, sum[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		t.Fatal("signature does not verify against the inline JWKS of envoy.yaml")
	}
	payload, err := b64.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	return claims
}

// TestDemoJWKSMatchesSigningKey guards the demo key pair: the inline JWKS of
// envoy.yaml must be the public half of the checked-in signing key, or every
// demo token is rejected.
func TestDemoJWKSMatchesSigningKey(t *testing.T) {
	token := mintDemoToken(t, map[string]any{"tenant": "t"})
	if got := verifyDemoToken(t, token)["tenant"]; got != "t" {
		t.Errorf("tenant claim: got %v, want t", got)
	}
}

// TestDemoTokens checks the checked-in demo tokens (used in the README's curl
// commands) verify and carry the identity claims envoy.yaml copies to headers.
func TestDemoTokens(t *testing.T) {
	p := demoProvider(t)
	for file, want := range demoClaims {
		t.Run(file, func(t *testing.T) {
			path := filepath.Join("demo-jwt", file)
			if *updateDemoTokens {
				if err := os.WriteFile(path, []byte(mintDemoToken(t, want)+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			claims := verifyDemoToken(t, string(readFile(t, path)))
			if got := claims["iss"]; got != p.GetIssuer() {
				t.Errorf("iss: got %v, want %q", got, p.GetIssuer())
			}
			if got := claims["aud"]; len(p.GetAudiences()) > 0 && got != p.GetAudiences()[0] {
				t.Errorf("aud: got %v, want %q", got, p.GetAudiences()[0])
			}
			for k, v := range want {
				if claims[k] != v {
					t.Errorf("claim %s: got %v, want %v", k, claims[k], v)
				}
			}
			for _, c := range p.GetClaimToHeaders() {
				if _, ok := claims[c.GetClaimName()]; !ok {
					t.Errorf("no claim %q, which envoy.yaml copies to %s", c.GetClaimName(), c.GetHeaderName())
				}
			}
		})
	}
}
