package monitoring_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/kwal/kwal/logstore"
	"github.com/kwal/kwal/logstore/kafka"
	"github.com/kwal/kwal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recordingRegisterer registers on a registry and keeps every collector
// registered, so that the names of metrics without series yet (a vector
// whose label values have not been seen) are known from their
// descriptions.
type recordingRegisterer struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	if err := r.Registerer.Register(c); err != nil {
		return err
	}
	r.collectors = append(r.collectors, c)
	return nil
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// exportedNames opens a store on a fresh registry, does what a datanode
// does (creates a namespace, claims a region, appends, reads, declares
// entries obsolete, prunes, makes a call the store refuses) and returns
// the names a Prometheus scrape would see: every family gathered, with
// _bucket, _sum and _count for histograms, plus every metric the store's
// collectors describe (series that ordinary work need not create, such as
// a retention's headroom on a topic that has none).
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	reg := prometheus.NewRegistry()
	rec := &recordingRegisterer{Registerer: reg}
	cfg := kafka.DefaultConfig()
	cfg.Brokers = testutil.Brokers(t)
	cfg.Registerer = rec
	cfg.IndexDir = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := kafka.Open(ctx, cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()

	ns := testutil.Topic(t)
	require.NoError(t, s.CreateNamespace(ctx, ns))
	_, err = s.Claim(ctx, ns, 1)
	require.NoError(t, err)
	var last logstore.EntryID
	for i := range 3 {
		res, err := s.AppendBatch(ctx, []logstore.Entry{{Namespace: ns, Region: 1, Data: []byte{byte(i)}}, {Namespace: ns, Region: 2, Data: []byte("y")}})
		require.NoError(t, err)
		last = res.LastEntryIDs[1]
	}
	n := 0
	for _, err := range s.Read(ctx, ns, 1, 1) {
		require.NoError(t, err)
		n++
	}
	require.Equal(t, 3, n)
	require.NoError(t, s.Obsolete(ctx, ns, 1, last))
	_, err = s.Prune(ctx, ns)
	require.NoError(t, err)
	_, err = s.AppendBatch(ctx, []logstore.Entry{{Namespace: "__refused", Region: 1, Data: []byte("x")}})
	require.ErrorIs(t, err, kafka.ErrInvalidNamespace)

	names := map[string]bool{}
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		names[mf.GetName()] = true
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM:
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[mf.GetName()+suffix] = true
			}
		case dto.MetricType_SUMMARY:
			names[mf.GetName()+"_sum"], names[mf.GetName()+"_count"] = true, true
		}
	}
	for _, c := range rec.collectors {
		ch := make(chan *prometheus.Desc)
		go func() {
			c.Describe(ch)
			close(ch)
		}()
		for d := range ch {
			if m := descName.FindStringSubmatch(d.String()); m != nil {
				names[m[1]] = true
			}
		}
	}
	require.True(t, names["kwal_append_latency_seconds_bucket"], "histograms are exported with _bucket")
	return names
}

// descName finds the name in a Desc's String, the only place it shows.
var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

// grafanaVars are the values a Grafana variable is replaced with before
// an expression is parsed: the dashboard's own variables and Grafana's
// built-in intervals.
var grafanaVars = map[string]string{
	"__rate_interval": "5m", "__interval": "1m", "__range": "1h", "__range_s": "3600",
	"job": "kwal", "instance": "datanode-1:9100", "namespace": "ns1",
}

var grafanaVar = regexp.MustCompile(`\$(?:\{(\w+)(?::[^}]*)?\}|(\w+))`)

// substitute replaces the Grafana variables in expr; a variable the
// dashboard does not define is an error.
func substitute(expr string) (string, error) {
	var err error
	out := grafanaVar.ReplaceAllStringFunc(expr, func(v string) string {
		m := grafanaVar.FindStringSubmatch(v)
		name := m[1] + m[2]
		val, ok := grafanaVars[name]
		if !ok && err == nil {
			err = fmt.Errorf("unknown Grafana variable $%s", name)
		}
		return val
	})
	return out, err
}

var promql = parser.NewParser(parser.Options{})

// checkExpr parses expr with the PromQL parser and returns an error naming
// every metric it selects that is not in known, and the metrics it selects.
func checkExpr(expr string, known map[string]bool) ([]string, error) {
	e, err := promql.ParseExpr(expr)
	if err != nil {
		return nil, fmt.Errorf("parse %q: %w", expr, err)
	}
	var names, unknown []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel {
				name = m.Value
			}
		}
		names = append(names, name)
		if !known[name] {
			unknown = append(unknown, name)
		}
		return nil
	})
	if len(names) == 0 {
		return nil, fmt.Errorf("%q selects no metric", expr)
	}
	if len(unknown) > 0 {
		return names, fmt.Errorf("%q selects metrics no store exports: %s", expr, strings.Join(unknown, ", "))
	}
	return names, nil
}

// TestCheckExprRefusesUnknownMetrics protects the check itself: a typo in
// a metric name, a selector by __name__, an undefined Grafana variable and
// an expression that does not parse are each reported.
func TestCheckExprRefusesUnknownMetrics(t *testing.T) {
	known := map[string]bool{"kwal_append_errors_total": true, "kwal_append_latency_seconds_bucket": true}
	_, err := checkExpr(`sum(rate(kwal_append_errors_total[5m])) > 0`, known)
	require.NoError(t, err)
	_, err = checkExpr(`sum(rate(kwal_append_error_total[5m])) > 0`, known)
	require.ErrorContains(t, err, "kwal_append_error_total")
	_, err = checkExpr(`histogram_quantile(0.99, rate({__name__="kwal_append_latency_seconds"}[5m]))`, known)
	require.ErrorContains(t, err, "kwal_append_latency_seconds", "a histogram is selected by its _bucket series")
	_, err = checkExpr(`sum(rate(kwal_append_errors_total[5m]) > 0`, known)
	require.ErrorContains(t, err, "parse")
	_, err = checkExpr(`vector(1)`, known)
	require.ErrorContains(t, err, "selects no metric")
	_, err = substitute(`rate(kwal_append_errors_total{namespace=~"$namespace"}[$__rate_interval])`)
	require.NoError(t, err)
	_, err = substitute(`rate(kwal_append_errors_total{pool="$pool"}[5m])`)
	require.ErrorContains(t, err, "$pool")
}

// docRef is a pointer from an annotation to a section of the docs:
// README.md, "Title" or docs/x.md, "Title".
var docRef = regexp.MustCompile(`(README\.md|docs/[a-z]+\.md), "([^"]+)"`)

// checkDocRefs checks that each section text names exists in its file, as
// a heading or a paragraph's bold lead.
func checkDocRefs(t *testing.T, where, text string) {
	t.Helper()
	for _, m := range docRef.FindAllStringSubmatch(strings.Join(strings.Fields(text), " "), -1) {
		b, err := os.ReadFile(filepath.Join("..", m[1]))
		require.NoError(t, err, "%s: %s", where, m[1])
		found := false
		for _, line := range strings.Split(string(b), "\n") {
			if (strings.HasPrefix(line, "#") || strings.HasPrefix(line, "**")) && strings.Contains(line, m[2]) {
				found = true
			}
		}
		require.True(t, found, "%s: %s has no section %q", where, m[1], m[2])
	}
}

// TestAlertRules protects kwal-alerts.yaml: it is a valid Prometheus rule
// file, every alert says how long, how bad, what and what to do (pointing
// at sections that exist), every expression selects only metrics a store
// exports, and together they watch what the README calls worth an alert.
func TestAlertRules(t *testing.T) {
	known := exportedNames(t)
	rgs, errs := rulefmt.ParseFile("kwal-alerts.yaml", false, model.UTF8Validation, promql, slog.New(slog.DiscardHandler))
	require.Empty(t, errs)
	watched := map[string]bool{}
	alerts := map[string]bool{}
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "group %s: only alerting rules", g.Name)
			require.False(t, alerts[r.Alert], "%s: one alert of that name", r.Alert)
			alerts[r.Alert] = true
			require.Positive(t, time.Duration(r.For), "%s has a for", r.Alert)
			require.Contains(t, []string{"warning", "critical"}, r.Labels["severity"], "%s: severity", r.Alert)
			require.NotEmpty(t, r.Annotations["summary"], "%s: summary", r.Alert)
			desc := r.Annotations["description"]
			require.Regexp(t, `README\.md|docs/[a-z]+\.md|kwal [a-z]+`, desc, "%s: the description says where to look or what to run", r.Alert)
			checkDocRefs(t, r.Alert, desc)
			names, err := checkExpr(r.Expr, known)
			require.NoError(t, err, r.Alert)
			for _, n := range names {
				watched[n] = true
			}
		}
	}
	for _, name := range []string{
		"kwal_append_errors_total", "kwal_refused_calls_total", "kwal_append_latency_seconds_bucket",
		"kwal_fenced_appends_total", "kwal_read_skipped_records_total", "kwal_index_load_failures_total",
		"kwal_index_checkpoint_errors_total", "kwal_topic_retention_seconds", "kwal_topic_retention_bytes",
		"kwal_retention_headroom_seconds", "kwal_prune_pinned_bytes", "kwal_prune_runs_total",
		"kwal_claims_check_failures_total", "kwal_claims_bad_records_total", "kwal_held_epochs_file_errors_total",
	} {
		require.True(t, watched[name], "an alert watches %s", name)
	}
}

// panelJSON is the part of a Grafana panel the test reads.
type panelJSON struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *sourceJSON `json:"datasource"`
	Targets    []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panelJSON `json:"panels"`
}

type sourceJSON struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// TestDashboard protects kwal-dashboard.json: a Grafana dashboard with a
// Prometheus data source variable and job, instance and namespace
// variables, the rows an operator looks for, every panel on the chosen
// data source, and every panel's and variable's expression parsed with the
// PromQL parser (Grafana's variables substituted) and selecting only
// metrics a store exports.
func TestDashboard(t *testing.T) {
	known := exportedNames(t)
	b, err := os.ReadFile("kwal-dashboard.json")
	require.NoError(t, err)
	var d struct {
		Title         string `json:"title"`
		UID           string `json:"uid"`
		SchemaVersion int    `json:"schemaVersion"`
		Templating    struct {
			List []struct {
				Name       string          `json:"name"`
				Type       string          `json:"type"`
				Query      json.RawMessage `json:"query"`
				Datasource *sourceJSON     `json:"datasource"`
			} `json:"list"`
		} `json:"templating"`
		Panels []panelJSON `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(b, &d))
	require.NotEmpty(t, d.Title)
	require.NotEmpty(t, d.UID)
	require.GreaterOrEqual(t, d.SchemaVersion, 36)

	vars := map[string]bool{}
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if v.Type == "datasource" {
			require.Equal(t, "datasource", v.Name)
			require.JSONEq(t, `"prometheus"`, string(v.Query))
			continue
		}
		require.Equal(t, "query", v.Type, v.Name)
		require.Equal(t, &sourceJSON{Type: "prometheus", UID: "${datasource}"}, v.Datasource, v.Name)
		var q struct {
			Query string `json:"query"`
		}
		require.NoError(t, json.Unmarshal(v.Query, &q), v.Name)
		m := labelValues.FindStringSubmatch(q.Query)
		require.NotNil(t, m, "variable %s: label_values(selector, label)", v.Name)
		expr, err := substitute(m[1])
		require.NoError(t, err, v.Name)
		_, err = checkExpr(expr, known)
		require.NoError(t, err, "variable %s", v.Name)
	}
	for _, v := range []string{"datasource", "job", "instance", "namespace"} {
		require.True(t, vars[v], "variable %s", v)
	}

	var rows []string
	ids := map[int]bool{}
	shown := map[string]bool{}
	var walk func([]panelJSON)
	walk = func(ps []panelJSON) {
		for _, p := range ps {
			require.False(t, ids[p.ID], "panel id %d is unique", p.ID)
			ids[p.ID] = true
			if p.Type == "row" {
				rows = append(rows, p.Title)
				walk(p.Panels)
				continue
			}
			require.Equal(t, &sourceJSON{Type: "prometheus", UID: "${datasource}"}, p.Datasource, p.Title)
			require.NotEmpty(t, p.Targets, p.Title)
			for _, tg := range p.Targets {
				expr, err := substitute(tg.Expr)
				require.NoError(t, err, p.Title)
				names, err := checkExpr(expr, known)
				require.NoError(t, err, "panel %q", p.Title)
				for _, n := range names {
					shown[n] = true
				}
			}
		}
	}
	walk(d.Panels)
	require.Equal(t, []string{"Appends", "Produce", "Reads and replay", "Index", "Prune and retention", "Claims and fencing"}, rows)
	for _, name := range []string{
		"kwal_append_entries_total", "kwal_append_bytes_total", "kwal_append_latency_seconds_bucket", "kwal_append_errors_total",
		"kwal_fenced_appends_total", "kwal_queue_requests", "kwal_queue_bytes",
		"kwal_produce_latency_seconds_bucket", "kwal_produce_records_bucket", "kwal_produce_bytes_bucket", "kwal_client_write_errors_total",
		"kwal_read_entries_total", "kwal_read_bytes_total", "kwal_read_fetches_total", "kwal_read_skipped_records_total", "kwal_read_fenced_entries_total",
		"kwal_index_watermark", "kwal_index_checkpoint_errors_total", "kwal_index_load_failures_total", "kwal_index_coverage_discarded_total",
		"kwal_prune_pinned_bytes", "kwal_log_bytes", "kwal_prune_runs_total", "kwal_prune_deleted_bytes_total",
		"kwal_prune_last_success_timestamp_seconds", "kwal_retention_headroom_seconds", "kwal_topic_retention_seconds",
		"kwal_claims_total", "kwal_claim_latency_seconds_bucket", "kwal_fencing_check_seconds_bucket",
		"kwal_claims_check_failures_total", "kwal_claims_bad_records_total", "kwal_held_epochs_file_errors_total",
	} {
		require.True(t, shown[name], "a panel shows %s", name)
	}
	var unshown []string
	for n := range known {
		if !shown[n] && !known[n+"_bucket"] && !strings.HasSuffix(n, "_sum") && !strings.HasSuffix(n, "_count") && n != "kwal_build_info" {
			unshown = append(unshown, n)
		}
	}
	sort.Strings(unshown)
	t.Logf("metrics no panel shows: %s", strings.Join(unshown, " "))
}
