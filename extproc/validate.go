package extproc

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// The attributes the server sets on every request itself, which no
// identity source may supply: a limit may be scoped by them or matched
// on them all the same.
const (
	// AttributeModel is the request's model, by family
	// (accounting.ModelFamily): every snapshot and spelling of a model
	// shares its limits.
	AttributeModel = accounting.AttributeModel
	// AttributeAPI is the request's API kind ("openai.chat", …; "other"
	// for a path that is not an LLM API call).
	AttributeAPI = "api"
)

// Validate reports every problem of the options that come from
// tokenwarden's config file, joined, each an [accounting.FieldError]
// named by its key in the file (identity.attributes.tenant.header,
// estimation.default_output_cap, settlement.hidden_reasoning_models[1],
// azure.deployments.prod). It does not look at Limiter, Counter, Logger
// or Registerer; [NewServer] calls it.
func (o *Options) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, accounting.FieldErrorf(field, format, args...))
	}
	errs = append(errs, accounting.PrefixFields("identity", o.Identity.Validate()))
	errs = append(errs, accounting.PrefixFields("estimation.learned_output", o.LearnedOutput.Validate()))
	if o.DefaultOutputCap < 0 || o.DefaultOutputCap > MaxOutputCap {
		bad("estimation.default_output_cap", "%d is outside 1..%d", o.DefaultOutputCap, MaxOutputCap)
	}
	for i, p := range o.HiddenReasoningModels {
		if p == "" {
			bad(fmt.Sprintf("settlement.hidden_reasoning_models[%d]", i), "must not be empty")
		}
	}
	for _, model := range slices.Sorted(maps.Keys(o.ContextWindows)) {
		errs = append(errs, accounting.ValidModelKey("settlement.context_windows", model))
		if n := o.ContextWindows[model]; n < 1 || n > accounting.MaxTokens {
			bad("settlement.context_windows."+model, "%d is outside 1..%d", n, int64(accounting.MaxTokens))
		}
	}
	for _, d := range slices.Sorted(maps.Keys(o.AzureDeployments)) {
		if d == "" || o.AzureDeployments[d] == "" || strings.Contains(d, "/") {
			bad("azure.deployments."+d, "needs a deployment name (no '/') and a model")
		}
	}
	for _, tier := range slices.Sorted(maps.Keys(o.ServiceTierFactors)) {
		if f := o.ServiceTierFactors[tier]; !(f > 0) || f > 1000 {
			bad("service_tiers."+tier, "%v is not a price factor (0 < factor ≤ 1000)", f)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(o.AllowUnmetered)) {
		if !slices.Contains(UnmeteredFamilies(), name) {
			bad("unmetered_apis."+name, "is not an unmetered API family (%s)", strings.Join(UnmeteredFamilies(), ", "))
		}
	}
	errs = append(errs, o.validateTracing()...)
	errs = append(errs, accounting.PrefixFields("request_bytes", o.RequestBytes.validate(&o.Identity)))
	return errors.Join(errs...)
}

// validate reports the problems of the request bytes' bounds, each
// named by its key under request_bytes.
func (o *RequestBytes) validate(identity *Identity) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, accounting.FieldErrorf(field, format, args...))
	}
	if o.InFlight < 0 {
		bad("in_flight", "%d is negative", o.InFlight)
	}
	switch {
	case o.PerPrincipal < 0:
		bad("per_principal", "%d is negative", o.PerPrincipal)
	case o.InFlight > 0 && o.PerPrincipal > o.InFlight:
		bad("per_principal", "%d is more than in_flight (%d)", o.PerPrincipal, o.InFlight)
	}
	for i, name := range o.Principal {
		if !slices.ContainsFunc(identity.Attributes, func(a AttributeSource) bool { return a.Name == name }) {
			bad(fmt.Sprintf("principal[%d]", i), "%q is not one of the identity attributes", name)
		}
	}
	return errors.Join(errs...)
}

// Validate reports every problem of the identity sources, joined, each
// an [accounting.FieldError] named by its key under identity in the
// config file (attributes.tenant.header, required[0]).
func (id *Identity) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, accounting.FieldErrorf(field, format, args...))
	}
	seen := make(map[string]bool, len(id.Attributes))
	for i := range id.Attributes {
		a := &id.Attributes[i]
		field := "attributes." + a.Name
		switch {
		case a.Name == AttributeModel || a.Name == AttributeAPI:
			bad(field, "%q is set by tokenwarden itself and cannot come from identity", a.Name)
			continue
		case seen[a.Name]:
			bad(field, "defined twice")
			continue
		}
		seen[a.Name] = true
		sources := 0
		for _, set := range []bool{a.Header != "", a.Metadata != nil, a.EnvoyAttribute != ""} {
			if set {
				sources++
			}
		}
		if sources != 1 {
			bad(field, "needs exactly one source: header, metadata or envoy_attribute")
			continue
		}
		if a.Header != "" && !validHeaderName(a.Header) {
			bad(field+".header", "%q is not a lower-case header name", a.Header)
		}
		if m := a.Metadata; m != nil && (m.Namespace == "" || m.Key == "") {
			bad(field+".metadata", "needs namespace and key")
		}
		if e := a.EnvoyAttribute; e != "" && !validEnvoyAttribute(e) {
			bad(field+".envoy_attribute", "%q is not an Envoy attribute or CEL expression as request_attributes lists it", e)
		}
	}
	for i, name := range id.Required {
		if !seen[name] {
			bad(fmt.Sprintf("required[%d]", i), "%q is not one of the attributes", name)
		}
	}
	return errors.Join(errs...)
}

// validHeaderName reports whether h is a header name as Envoy hands it
// over: lower-case letters, digits, '-' and '_'.
func validHeaderName(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// validEnvoyAttribute reports whether a can be what the filter's
// request_attributes lists: an attribute (xds.cluster_name) or a CEL
// expression (xds.route_metadata.filter_metadata['tokenwarden']['provider']),
// whose text is the key Envoy sends its value under. Envoy checks the
// expression; here it must be 1-256 printable ASCII characters, without
// space at either end, so that a typo shows up in check-config rather
// than as an attribute that never arrives.
func validEnvoyAttribute(a string) bool {
	if a == "" || len(a) > 256 || a[0] == ' ' || a[len(a)-1] == ' ' {
		return false
	}
	for i := 0; i < len(a); i++ {
		if a[i] < 0x20 || a[i] > 0x7e {
			return false
		}
	}
	return true
}
