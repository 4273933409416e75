package extproc

import (
	"strings"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/protobuf/types/known/structpb"
)

// attributesKey is the key of the filter's CEL attributes in a
// ProcessingRequest: response_attributes arrive there on the response
// headers message.
const attributesKey = "envoy.filters.http.ext_proc"

// codeDetailsAttribute is the response attribute that says who produced
// a response: "via_upstream" for the upstream, a reason for Envoy's own
// replies. The shipped filter configs ask for it in response_attributes.
const codeDetailsAttribute = "response.code_details"

// upstreamServiceTime is the header Envoy's router adds to every response
// that came from the upstream, and not to its own replies (unless the
// router runs with suppress_envoy_headers).
const upstreamServiceTime = "x-envoy-upstream-service-time"

// responseOrigin tells a provider's response from Envoy's own reply (a
// route timeout's 504, an upstream reset's 503), which reach ext_proc as
// ordinary response headers too. The response.code_details attribute
// says it exactly; without it, a response without the router's
// x-envoy-upstream-service-time header is taken for Envoy's own, sent
// after the request may have reached the provider — the side that keeps
// the reservation.
func responseOrigin(h *extprocv3.HttpHeaders, attrs map[string]*structpb.Struct) origin {
	if v, ok := attrs[attributesKey].GetFields()[codeDetailsAttribute]; ok {
		if d, ok := v.GetKind().(*structpb.Value_StringValue); ok {
			return originFromDetails(d.StringValue)
		}
	}
	if _, ok := headerValue(h, upstreamServiceTime); ok {
		return fromUpstream
	}
	return envoyAfterSend
}

// originFromDetails reads Envoy's response code details. Only the
// details that show the request never left Envoy — no connection, no
// healthy host, no route, an overflowing pool — count as never sent;
// any other reply of Envoy's may follow a request the provider got.
func originFromDetails(d string) origin {
	switch {
	case d == "via_upstream":
		return fromUpstream
	case strings.Contains(d, "connection_failure"), strings.Contains(d, "connect_error"),
		strings.Contains(d, "{overflow}"), d == "no_healthy_upstream", d == "cluster_not_found",
		d == "route_not_found", d == "maintenance_mode":
		return envoyNeverSent
	}
	return envoyAfterSend
}
