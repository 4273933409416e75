// Package istio applies tokenwarden's shipped Istio files (envoy/istio) with
// Istio's own config generation — istiod's listener, route and cluster
// builders and its EnvoyFilter patching — to gateways that serve the LLM
// host and other applications, and checks how far each patch reaches. It
// is a module of its own so that Istio's dependencies stay out of
// tokenwarden's go.mod; .ci/test runs its tests.
package istio
