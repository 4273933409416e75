// Package localrun holds what the commands that run tokenwarden's stack
// as processes on one machine (the demo, the soak) share: finding the
// repository and the Envoy binary, tying each child's life to the
// command's, and telling when the stack is ready to take traffic. The
// Envoy bootstrap they run is rendered by internal/envoyconfig.
package localrun
