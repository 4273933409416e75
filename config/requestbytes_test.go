package config

import (
	"reflect"
	"testing"

	"github.com/tokenwarden/tokenwarden/extproc"
)

func TestParseRequestBytes(t *testing.T) {
	tests := []struct {
		name    string
		config  string
		want    extproc.RequestBytes
		wantErr string
	}{
		{"default: derived by the server", "", extproc.RequestBytes{}, ""},
		{"sizes with units", "request_bytes: {in_flight: 256MiB, per_principal: 65536KiB}\n",
			extproc.RequestBytes{InFlight: 256 << 20, PerPrincipal: 64 << 20}, ""},
		{"plain bytes and a principal", "request_bytes: {in_flight: 1073741824, per_principal: 100B, principal: [tenant, user]}\n",
			extproc.RequestBytes{InFlight: 1 << 30, PerPrincipal: 100, Principal: []string{"tenant", "user"}}, ""},
		{"gibibytes", "request_bytes: {in_flight: 2GiB}\n", extproc.RequestBytes{InFlight: 2 << 30}, ""},
		{"not a size", "request_bytes: {in_flight: 256MB}\n", extproc.RequestBytes{},
			`config: request_bytes.in_flight: "256MB" is not a size in bytes (e.g. 268435456, 256MiB, 1GiB)`},
		{"zero", "request_bytes: {per_principal: 0}\n", extproc.RequestBytes{},
			`config: request_bytes.per_principal: "0" is not a size in bytes (e.g. 268435456, 256MiB, 1GiB)`},
		{"too large to count", "request_bytes: {in_flight: 9000000TiB}\n", extproc.RequestBytes{},
			`config: request_bytes.in_flight: "9000000TiB" is not a size in bytes (e.g. 268435456, 256MiB, 1GiB)`},
		{"a share above the whole", "request_bytes: {in_flight: 64MiB, per_principal: 65MiB}\n", extproc.RequestBytes{},
			"config: request_bytes.per_principal: 68157440 is more than in_flight (67108864)"},
		{"a principal without a source", "request_bytes: {principal: [team]}\n", extproc.RequestBytes{},
			`config: request_bytes.principal[0]: "team" is not one of the identity attributes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(baseConfig + tt.config))
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("got error %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := c.Server.RequestBytes; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}
