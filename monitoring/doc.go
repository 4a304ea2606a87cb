// Package monitoring holds kwal's Grafana dashboard (kwal-dashboard.json)
// and Prometheus alerting rules (kwal-alerts.yaml), and the test that
// checks every expression in them against the metrics a store exports.
// It is a module of its own so that kwal's module does not require
// github.com/prometheus/prometheus, whose PromQL parser the test uses.
package monitoring
