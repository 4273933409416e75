// Package envoy holds the Envoy configuration tokenwarden ships to its users —
// the static bootstrap envoy.yaml used by docker compose, the local demo
// (cmd/demo, with demo/tokenwarden.yaml) and the end-to-end tests, the Istio
// EnvoyFilter (istio/) and the Envoy Gateway policies (gateway/) — and the
// tests that check them, against each other and against the Kubernetes base
// in deploy/kubernetes.
//
// The package has no code of its own: its tests decode every shipped Envoy
// fragment into go-control-plane's protos and run their validation, run the
// real Envoy binary in validate mode on every bootstrap (see
// .ci/install-envoy.sh), check that both reject deliberately broken copies, and
// check that docker-compose.yaml refers to files and flags that exist, and
// run the README's demo commands as a new user would.
package envoy
