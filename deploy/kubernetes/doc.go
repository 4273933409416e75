// Package kubernetes holds tokenwarden's Kubernetes package: a Kustomize
// base (base/), optional components for an in-cluster Redis (components/redis)
// and for the Prometheus Operator (components/monitoring), and an overlay
// that combines them (example/). See docs/operations.md, "Kubernetes".
//
// It has no code. Its tests render every combination with the Kustomize
// library, the code behind kubectl kustomize, and check the result: the
// objects agree on namespace, names, labels and ports; the config the
// Deployment mounts passes tokenwarden check-config and points at the Redis
// the component runs; the ServiceMonitor scrapes the admin port; the
// PrometheusRule carries exactly the alerts of deploy/prometheus.
package kubernetes
