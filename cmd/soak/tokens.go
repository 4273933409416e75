package main

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"

	"go.yaml.in/yaml/v3"
)

// Files of the repository the soak reads, relative to its root.
const (
	envoyConfig = "envoy/envoy.yaml"
	// signingKey is the private half of envoy.yaml's demo JWT provider,
	// checked in for the demo and the tests.
	signingKey = "envoy/demo-jwt/signing-key.DEMO-ONLY.pem"
)

// jwtProvider is what a token must carry for envoy.yaml's jwt_authn to
// accept it.
type jwtProvider struct {
	issuer, audience, kid string
	key                   *ecdsa.PrivateKey
}

// loadProvider reads the demo provider's issuer, audience and key id from
// the Envoy bootstrap and its private key from the PEM file.
func loadProvider(envoyYAML, keyPEM []byte) (*jwtProvider, error) {
	var doc struct {
		StaticResources struct {
			Listeners []struct {
				FilterChains []struct {
					Filters []struct {
						TypedConfig struct {
							HTTPFilters []struct {
								Name        string `yaml:"name"`
								TypedConfig struct {
									Providers map[string]struct {
										Issuer    string   `yaml:"issuer"`
										Audiences []string `yaml:"audiences"`
										LocalJWKS struct {
											InlineString string `yaml:"inline_string"`
										} `yaml:"local_jwks"`
									} `yaml:"providers"`
								} `yaml:"typed_config"`
							} `yaml:"http_filters"`
						} `yaml:"typed_config"`
					} `yaml:"filters"`
				} `yaml:"filter_chains"`
			} `yaml:"listeners"`
		} `yaml:"static_resources"`
	}
	if err := yaml.Unmarshal(envoyYAML, &doc); err != nil {
		return nil, err
	}
	p := &jwtProvider{}
	for _, l := range doc.StaticResources.Listeners {
		for _, fc := range l.FilterChains {
			for _, f := range fc.Filters {
				for _, hf := range f.TypedConfig.HTTPFilters {
					prov, ok := hf.TypedConfig.Providers["tokenwarden-demo"]
					if hf.Name != "envoy.filters.http.jwt_authn" || !ok || len(prov.Audiences) == 0 {
						continue
					}
					var set struct {
						Keys []struct {
							Kid string `json:"kid"`
						} `json:"keys"`
					}
					if err := json.Unmarshal([]byte(prov.LocalJWKS.InlineString), &set); err != nil || len(set.Keys) == 0 {
						return nil, fmt.Errorf("provider tokenwarden-demo: no key in its local_jwks (%v)", err)
					}
					p.issuer, p.audience, p.kid = prov.Issuer, prov.Audiences[0], set.Keys[0].Kid
				}
			}
		}
	}
	if p.kid == "" {
		return nil, errors.New("no jwt_authn provider tokenwarden-demo")
	}
	block, _ := pem.Decode(keyPEM)
	if block == nil {
		return nil, errors.New("signing key: no PEM block")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		if k, err = x509.ParseECPrivateKey(block.Bytes); err != nil {
			return nil, fmt.Errorf("signing key: %w", err)
		}
	}
	ec, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("signing key: got %T, want an ECDSA key", k)
	}
	p.key = ec
	return p, nil
}

// sign returns an ES256 JWT with the provider's issuer and audience and
// these claims.
func (p *jwtProvider) sign(claims map[string]string) (string, error) {
	all := map[string]string{"iss": p.issuer, "aud": p.audience}
	for k, v := range claims {
		all[k] = v
	}
	header, _ := json.Marshal(map[string]string{"alg": "ES256", "typ": "JWT", "kid": p.kid})
	payload, _ := json.Marshal(all)
	b64 := base64.RawURLEncoding
	input := b64.EncodeToString(header) + "." + b64.EncodeToString(payload)
	sum := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, p.key, sum[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + b64.EncodeToString(sig), nil
}
