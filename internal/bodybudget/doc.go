// Package bodybudget bounds the request bodies a replica holds at once.
//
// A request body arrives whole (Envoy's BUFFERED mode sends it in one
// gRPC message of up to 64 MiB), and the server holds it, in more than
// one copy, from its arrival until the reply that releases it to the
// upstream has been sent: for the parse and the reservation, and for as
// long as a limit with wait_up_to holds the request. Without a bound, a
// burst of large bodies takes the process past its memory limit, and the
// out-of-memory kill fails every tenant's requests in flight.
//
// A [Budget] counts the bytes of the bodies in flight, in total and per
// principal (the caller whose identity the body belongs to). A body is
// charged before Envoy sends it: at the request headers, where the
// principal is known and the size is announced by content-length, or,
// when it is not, the most a body may be. A charge that does not fit is
// refused there, so Envoy never sends the body. The per-principal share
// keeps one caller from taking the whole budget: another caller's small
// requests still fit.
//
// [Memory] finds the memory the process is given (its cgroup's limit,
// the Go runtime's memory limit), and [Default] derives a budget from it.
package bodybudget
