package extproc_test

import (
	"errors"
	"net"
	"strings"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/tokenwarden/tokenwarden/accounting"
	"github.com/tokenwarden/tokenwarden/accounting/memstore"
	"github.com/tokenwarden/tokenwarden/extproc"
)

// fieldsOf lists the fields of the FieldErrors err joins, at any depth.
func fieldsOf(err error) []string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, fieldsOf(e)...)
		}
		return out
	}
	var fe *accounting.FieldError
	if errors.As(err, &fe) {
		return []string{fe.Field}
	}
	if err != nil {
		return []string{"(no field: " + err.Error() + ")"}
	}
	return nil
}

func TestOptionsValidate(t *testing.T) {
	header := func(name, h string) extproc.AttributeSource { return extproc.AttributeSource{Name: name, Header: h} }
	tests := []struct {
		name string
		opts extproc.Options
		want string // the fields named, in order
	}{
		{"zero value", extproc.Options{}, ""},
		{"valid", extproc.Options{
			Identity: extproc.Identity{Attributes: []extproc.AttributeSource{header("tenant", "x-tenant-id"),
				{Name: "sub", Metadata: &extproc.MetadataSource{Namespace: "jwt", Key: "payload", Path: []string{"sub"}}}},
				Required: []string{"tenant", "sub"}},
			DefaultOutputCap: extproc.MaxOutputCap, HiddenReasoningModels: []string{}, AzureDeployments: map[string]string{"prod": "gpt-4o"},
		}, ""},
		{"reserved attribute", extproc.Options{Identity: extproc.Identity{Attributes: []extproc.AttributeSource{header("model", "x-model")}}},
			"identity.attributes.model"},
		{"attribute twice", extproc.Options{Identity: extproc.Identity{Attributes: []extproc.AttributeSource{header("t", "a"), header("t", "b")}}},
			"identity.attributes.t"},
		{"no source", extproc.Options{Identity: extproc.Identity{Attributes: []extproc.AttributeSource{{Name: "t"}}}},
			"identity.attributes.t"},
		{"two sources", extproc.Options{Identity: extproc.Identity{Attributes: []extproc.AttributeSource{
			{Name: "t", Header: "x", Metadata: &extproc.MetadataSource{Namespace: "n", Key: "k"}}}}}, "identity.attributes.t"},
		{"header with a space", extproc.Options{Identity: extproc.Identity{Attributes: []extproc.AttributeSource{header("t", "x y")}}},
			"identity.attributes.t.header"},
		{"upper-case header", extproc.Options{Identity: extproc.Identity{Attributes: []extproc.AttributeSource{header("t", "X-Tenant")}}},
			"identity.attributes.t.header"},
		{"metadata without a key", extproc.Options{Identity: extproc.Identity{Attributes: []extproc.AttributeSource{
			{Name: "t", Metadata: &extproc.MetadataSource{Namespace: "n"}}}}}, "identity.attributes.t.metadata"},
		{"required unknown", extproc.Options{Identity: extproc.Identity{Attributes: []extproc.AttributeSource{header("t", "x")},
			Required: []string{"t", "tenant"}}}, "identity.required[1]"},
		{"negative output cap", extproc.Options{DefaultOutputCap: -5}, "estimation.default_output_cap"},
		{"output cap too large", extproc.Options{DefaultOutputCap: extproc.MaxOutputCap + 1}, "estimation.default_output_cap"},
		{"empty reasoning pattern", extproc.Options{HiddenReasoningModels: []string{"o1*", ""}}, "settlement.hidden_reasoning_models[1]"},
		{"azure deployments, sorted", extproc.Options{AzureDeployments: map[string]string{"b/c": "m", "a": ""}},
			"azure.deployments.a azure.deployments.b/c"},
		{"every section at once", extproc.Options{
			Identity:         extproc.Identity{Attributes: []extproc.AttributeSource{header("api", "x")}, Required: []string{"x"}},
			DefaultOutputCap: -1, HiddenReasoningModels: []string{""}, AzureDeployments: map[string]string{"": "m"},
		}, "identity.attributes.api identity.required[0] estimation.default_output_cap settlement.hidden_reasoning_models[0] azure.deployments."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := strings.Join(fieldsOf(tt.opts.Validate()), " "); got != tt.want {
				t.Errorf("fields: got %q, want %q (error: %v)", got, tt.want, tt.opts.Validate())
			}
		})
	}
}

func newLimiter(t *testing.T) *accounting.Limiter {
	t.Helper()
	lim, err := accounting.New(accounting.Options{Store: memstore.New(memstore.Options{})})
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// TestNewServerValidates: NewServer refuses what Validate reports.
func TestNewServerValidates(t *testing.T) {
	_, err := extproc.NewServer(extproc.Options{Limiter: newLimiter(t), HiddenReasoningModels: []string{""}})
	if want := "settlement.hidden_reasoning_models[0]: must not be empty"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("NewServer: got %v, want an error saying %q", err, want)
	}
	if _, err := extproc.NewServer(extproc.Options{}); err == nil {
		t.Errorf("NewServer without a limiter: got nil, want an error")
	}
}

// TestRegister: Register puts the ExternalProcessor and the health
// service on a grpc.Server; both report SERVING until the returned
// health server shuts down.
func TestRegister(t *testing.T) {
	srv, err := extproc.NewServer(extproc.Options{Limiter: newLimiter(t)})
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(srv.ServerOptions()...)
	hs := extproc.Register(gs, srv)
	if _, ok := gs.GetServiceInfo()[extprocv3.ExternalProcessor_ServiceDesc.ServiceName]; !ok {
		t.Errorf("services: got %v, want the ExternalProcessor", gs.GetServiceInfo())
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(lis)
	defer gs.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	health := healthpb.NewHealthClient(conn)
	check := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		for _, service := range []string{"", extprocv3.ExternalProcessor_ServiceDesc.ServiceName} {
			resp, err := health.Check(t.Context(), &healthpb.HealthCheckRequest{Service: service})
			if err != nil || resp.GetStatus() != want {
				t.Errorf("health of %q: got %v (err %v), want %v", service, resp.GetStatus(), err, want)
			}
		}
	}
	check(healthpb.HealthCheckResponse_SERVING)
	hs.Shutdown()
	check(healthpb.HealthCheckResponse_NOT_SERVING)
}
