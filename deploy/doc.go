// Package deploy holds what operators run beside tokenwarden: a Grafana
// dashboard (grafana/), Prometheus alerting rules (prometheus/) and the
// Kubernetes package (kubernetes/, with its own tests). It has no code: its
// tests build the server's metric registry — extproc.NewServer and
// accounting.New registering into one prometheus.Registry, as the binary
// does — and check that every dashboard query and alert expression names
// only metrics, labels and label values the server exports, that the
// dashboard covers every tokenwarden metric, and that the rule file has the
// shape Prometheus loads.
package deploy
