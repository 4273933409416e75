package config

import (
	"strconv"
	"strings"
)

// requestBytesFile is the request_bytes section: the bounds on the
// request bodies a replica holds at once (extproc.RequestBytes).
type requestBytesFile struct {
	// InFlight and PerPrincipal are sizes in bytes: a number, with an
	// optional unit B, KiB, MiB, GiB or TiB, as GOMEMLIMIT takes them.
	InFlight     string   `yaml:"in_flight"`
	PerPrincipal string   `yaml:"per_principal"`
	Principal    []string `yaml:"principal"`
}

// requestBytes reads the request_bytes section.
func (c *Config) requestBytes(f *file, p *problems) {
	rb := &c.Server.RequestBytes
	rb.InFlight = byteSize("request_bytes.in_flight", f.RequestBytes.InFlight, p)
	rb.PerPrincipal = byteSize("request_bytes.per_principal", f.RequestBytes.PerPrincipal, p)
	rb.Principal = f.RequestBytes.Principal
}

// byteUnits are the units a size may carry, as GOMEMLIMIT spells them.
var byteUnits = []struct {
	suffix string
	shift  uint
}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}

// byteSize reads a size (field names it in problems): "" is 0, the
// library's default; anything else a positive whole number of bytes,
// with an optional unit.
func byteSize(field, s string, p *problems) int64 {
	if s == "" {
		return 0
	}
	num, shift := s, uint(0)
	for _, u := range byteUnits {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, shift = n, u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)>>shift {
		p.add(field, "%q is not a size in bytes (e.g. 268435456, 256MiB, 1GiB)", s)
		return 0
	}
	return n << shift
}
