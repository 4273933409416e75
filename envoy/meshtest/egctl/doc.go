// Package egctl pins Envoy Gateway's egctl, the command whose "x translate"
// turns Gateway API and Envoy Gateway resources into Envoy config with
// Envoy Gateway's own translator. It is a module of its own so that
// Envoy Gateway's dependencies stay out of tokenwarden's go.mod; the
// envoy package's TestEnvoyGatewayTranslated runs the binary:
//
//	EGCTL=$(go -C envoy/meshtest/egctl tool -n egctl) go test ./envoy -run TestEnvoyGatewayTranslated
package egctl
