package extproc

import (
	"fmt"
	"strconv"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tokenwarden/tokenwarden/accounting"
)

// MaxAttributeBytes bounds an identity value, and the model a request
// names (the model attribute). Values are used verbatim in store keys; a
// longer one is refused (400) rather than cut, since a cut value could
// collide with another caller's.
const MaxAttributeBytes = 1024

// Identity says where each identity attribute of a request comes from.
// Only these sources are trusted: the request body never supplies
// identity.
type Identity struct {
	Attributes []AttributeSource
	// Required attributes must be present; a request without one is
	// refused with 401 rather than counted in a shared bucket.
	Required []string
}

// AttributeSource is where one attribute's value comes from: a request
// header, a string in Envoy's dynamic metadata (e.g. a claim of a JWT
// verified by jwt_authn), or an Envoy attribute the filter sends with the
// request headers (the upstream cluster, for a provider limit).
type AttributeSource struct {
	Name string
	// Header is a lower-case request header name.
	Header string
	// Metadata reads filter_metadata[Namespace][Key] and then Path into
	// nested structs.
	Metadata *MetadataSource
	// EnvoyAttribute reads one of Envoy's attributes (xds.cluster_name,
	// xds.route_name), which the filter sends when its
	// request_attributes lists it: values a client cannot set, decided
	// by the route the request matched.
	EnvoyAttribute string
	// Default applies when the source has no value and HasDefault is set.
	Default    string
	HasDefault bool
}

// MetadataSource locates a value in Envoy's dynamic metadata.
type MetadataSource struct {
	Namespace string
	Key       string
	Path      []string
}

// identityError is a request whose identity cannot be used.
type identityError struct {
	missing string // a required attribute that is absent
	tooLong string // an attribute whose value is too long
}

func (e *identityError) Error() string {
	if e.missing != "" {
		return fmt.Sprintf("required identity attribute %q is missing", e.missing)
	}
	return fmt.Sprintf("identity attribute %q is longer than %d bytes", e.tooLong, MaxAttributeBytes)
}

// resolve returns the request's attributes. headerValue looks up a request
// header; md is the request's metadata context and ea the Envoy
// attributes of its request headers message (either may be nil).
func (id *Identity) resolve(headerValue func(string) (string, bool), md *corev3.Metadata, ea map[string]*structpb.Struct) (accounting.Attributes, error) {
	attrs := make(accounting.Attributes, 0, len(id.Attributes)+2)
	for i := range id.Attributes {
		src := &id.Attributes[i]
		var v string
		var ok bool
		if src.Header != "" {
			v, ok = headerValue(src.Header)
		} else if src.Metadata != nil {
			v, ok = metadataValue(md, src.Metadata)
		} else if src.EnvoyAttribute != "" {
			v, ok = scalarString(ea[attributesKey].GetFields()[src.EnvoyAttribute])
		}
		if v, ok = src.orDefault(v, ok); !ok {
			continue
		}
		if len(v) > MaxAttributeBytes {
			return nil, &identityError{tooLong: src.Name}
		}
		attrs = append(attrs, accounting.Attribute{Name: src.Name, Value: v})
	}
	for _, name := range id.Required {
		if _, ok := attrs.Get(name); !ok {
			return nil, &identityError{missing: name}
		}
	}
	return attrs, nil
}

// orDefault is the value a request carries for src when its source gave
// v (ok: it gave one): an empty value is none, and none is the default,
// where src has one.
func (src *AttributeSource) orDefault(v string, ok bool) (string, bool) {
	if ok && v == "" {
		ok = false
	}
	if !ok && src.HasDefault {
		return src.Default, true
	}
	return v, ok
}

// WithDefaults returns the attributes of a request whose sources give
// the values in given, as a request's are resolved: an identity
// attribute given empty is not given, and one not given takes its
// default where it has one. Attributes that are not identity attributes
// (model, api) are kept as they are. It checks neither Required nor
// lengths: it describes a request, for the usage API, and admits none.
func (id *Identity) WithDefaults(given accounting.Attributes) accounting.Attributes {
	out := make(accounting.Attributes, 0, len(given)+len(id.Attributes))
	for _, a := range given {
		if !id.has(a.Name) {
			out = append(out, a)
		}
	}
	for i := range id.Attributes {
		src := &id.Attributes[i]
		v, ok := given.Get(src.Name)
		if v, ok = src.orDefault(v, ok); ok {
			out = append(out, accounting.Attribute{Name: src.Name, Value: v})
		}
	}
	return out
}

// has reports whether name is one of the identity's attributes.
func (id *Identity) has(name string) bool {
	for i := range id.Attributes {
		if id.Attributes[i].Name == name {
			return true
		}
	}
	return false
}

func metadataValue(md *corev3.Metadata, src *MetadataSource) (string, bool) {
	if md == nil {
		return "", false
	}
	ns := md.GetFilterMetadata()[src.Namespace]
	if ns == nil {
		return "", false
	}
	v := ns.GetFields()[src.Key]
	for _, p := range src.Path {
		s := v.GetStructValue()
		if s == nil {
			return "", false
		}
		v = s.GetFields()[p]
	}
	return scalarString(v)
}

// scalarString renders a metadata value usable as an identity: strings
// verbatim, numbers and booleans in their plain form.
func scalarString(v *structpb.Value) (string, bool) {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return k.StringValue, true
	case *structpb.Value_NumberValue:
		return strconv.FormatFloat(k.NumberValue, 'f', -1, 64), true
	case *structpb.Value_BoolValue:
		return strconv.FormatBool(k.BoolValue), true
	}
	return "", false
}
