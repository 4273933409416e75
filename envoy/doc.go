// Package envoy holds the Envoy configuration tokenwarden ships to its users —
// the static bootstrap envoy.yaml used by docker compose and the end-to-end
// tests, the Istio EnvoyFilter (istio/), the Envoy Gateway policies (gateway/)
// and the Kubernetes manifests (kubernetes/) — and the tests that check them.
//
// The package has no code of its own: its tests decode every shipped Envoy
// fragment into go-control-plane's protos and run their validation, run the
// real Envoy binary in validate mode on every bootstrap (see
// .ci/install-envoy.sh), check that both reject deliberately broken copies, and
// check that docker-compose.yaml refers to files and flags that exist.
package envoy
