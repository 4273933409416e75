package llm

// ErrorKind is the kind of reply tokenwarden sends on its own.
type ErrorKind uint8

// The reply kinds, each with its HTTP status.
const (
	// RateLimited is a 429: a limit tripped, or the request can never fit.
	RateLimited ErrorKind = iota
	// Unavailable is a 503: the store is unreachable and a fail-closed
	// limit applies.
	Unavailable
	// Unauthenticated is a 401: a required identity attribute is missing.
	Unauthenticated
	// InvalidRequest is a 400: the body or an identity value is unusable.
	InvalidRequest
	// Forbidden is a 403: a call tokenwarden cannot meter, which the
	// operator has not allowed.
	Forbidden
)

// Status returns the HTTP status of the kind.
func (k ErrorKind) Status() int {
	switch k {
	case RateLimited:
		return 429
	case Unavailable:
		return 503
	case Unauthenticated:
		return 401
	case Forbidden:
		return 403
	}
	return 400
}

// Error is one of tokenwarden's own error replies, before it is rendered
// in an API's shape.
type Error struct {
	Kind ErrorKind
	// Dimension is the tripped limit's dimension (requests, tokens, cost)
	// for RateLimited.
	Dimension string
	// Code is a machine-readable code, e.g. "rate_limit_exceeded",
	// "limiter_unavailable", "missing_identity".
	Code    string
	Message string
}

// Reply is a rendered error body and the headers that go with it.
type Reply struct {
	Body []byte
	// Headers are extra response headers (content-type is always
	// application/json and need not be listed).
	Headers [][2]string
}
