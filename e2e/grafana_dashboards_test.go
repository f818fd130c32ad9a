// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// scrapeLabels reads the prometheus exporter's text exposition into metric name
// -> label names seen on it.
func scrapeLabels(t *testing.T, p parser.Parser, addr string) map[string]map[string]bool {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	out := map[string]map[string]bool{}
	// A native histogram (an exponential one, through the prometheus
	// exporter) shows in the text format as _count, _sum and a lone +Inf
	// bucket: its own name, which PromQL selects, is taken from _count when
	// the name has no finite bucket.
	classic := map[string]bool{}
	s := bufio.NewScanner(bytes.NewReader(body))
	s.Buffer(make([]byte, 1<<20), 16<<20)
	for s.Scan() {
		line := strings.TrimSpace(s.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// The series is everything before the value (and an optional
		// timestamp); label values may hold spaces, so cut after "}".
		series := line
		if i := strings.LastIndex(line, "}"); i >= 0 {
			series = line[:i+1]
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			series = line[:i]
		}
		ls, err := p.ParseMetric(series)
		require.NoErrorf(t, err, "scrape line %q", line)
		name := ls.Get(labels.MetricName)
		if base, ok := strings.CutSuffix(name, "_bucket"); ok && ls.Get("le") != "+Inf" {
			classic[base] = true
		}
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		ls.Range(func(l labels.Label) {
			if l.Name != labels.MetricName {
				out[name][l.Name] = true
			}
		})
	}
	for name, ls := range out {
		if base, ok := strings.CutSuffix(name, "_count"); ok && !classic[base] && out[base] == nil {
			if _, hasSum := out[base+"_sum"]; hasSum {
				out[base] = ls
			}
		}
	}
	return out
}

// query is one PromQL expression of a dashboard, with where it is.
type query struct {
	where, expr string
	legend      string // the target's legendFormat
	variable    bool   // a templating query (label_values)
}

// dashboardQueries walks a dashboard's JSON for panel target expressions
// (any "expr", rows included) and templating queries.
func dashboardQueries(t *testing.T, path string) []query {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(data, &doc), path)
	var out []query
	var walk func(v any, where string)
	walk = func(v any, where string) {
		switch x := v.(type) {
		case map[string]any:
			if title, ok := x["title"].(string); ok {
				where = filepath.Base(path) + ": " + title
			}
			if e, ok := x["expr"].(string); ok {
				legend, _ := x["legendFormat"].(string)
				out = append(out, query{where: where, expr: e, legend: legend})
			}
			for k, c := range x {
				if k != "templating" {
					walk(c, where)
				}
			}
		case []any:
			for _, c := range x {
				walk(c, where)
			}
		}
	}
	walk(doc, filepath.Base(path))
	tmpl, _ := doc["templating"].(map[string]any)
	list, _ := tmpl["list"].([]any)
	for _, v := range list {
		m := v.(map[string]any)
		if m["type"] != "query" {
			continue
		}
		var q string
		switch x := m["query"].(type) {
		case string:
			q = x
		case map[string]any:
			q, _ = x["query"].(string)
		}
		out = append(out, query{where: filepath.Base(path) + ": variable " + m["name"].(string), expr: q, variable: true})
	}
	return out
}

var (
	grafanaVar   = regexp.MustCompile(`\$\{?(\w+)(:\w+)?\}?`)
	labelValues  = regexp.MustCompile(`^\s*label_values\(\s*(.*?)\s*,\s*(\w+)\s*\)\s*$`)
	rangeVarName = map[string]bool{"__rate_interval": true, "__interval": true, "__range": true}
)

// substitute replaces Grafana's variables so that Prometheus's parser reads
// the expression: ranges become 5m, template variables a regex value.
func substitute(expr string) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(m string) string {
		name := grafanaVar.FindStringSubmatch(m)[1]
		if rangeVarName[name] {
			return "5m"
		}
		return "x"
	})
}

// checkSelector checks one metric selector against the scrape.
func checkSelector(t *testing.T, where string, matchers []*labels.Matcher, scraped map[string]map[string]bool) (string, bool) {
	t.Helper()
	var name string
	for _, m := range matchers {
		if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
			name = m.Value
		}
	}
	if !assert.NotEmptyf(t, name, "%s: a selector without a metric name", where) {
		return "", false
	}
	got, ok := scraped[name]
	if !assert.Truef(t, ok, "%s: metric %s is not exported by the shipped config", where, name) {
		return name, false
	}
	for _, m := range matchers {
		if m.Name != labels.MetricName {
			assert.Truef(t, got[m.Name], "%s: %s has no label %s (it has %v)", where, name, m.Name, keys(got))
		}
	}
	return name, true
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestGrafanaDashboardsUseExportedNames checks that every PromQL expression
// and variable query in dashboards/ names only metrics and labels that the
// shipped config's prometheus exporter really exports, in a scrape of the
// built collector running config/default.yaml fed with traffic.
func TestGrafanaDashboardsUseExportedNames(t *testing.T) {
	p := parser.NewParser(parser.Options{})
	files, err := filepath.Glob(filepath.Join(e2etest.RepoRoot(), "dashboards", "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 3, "GenAI serving overview, GPU and kernels, engine steps")

	var queries []query
	vars := map[string]bool{}
	for _, f := range files {
		qs := dashboardQueries(t, f)
		require.NotEmpty(t, qs, f)
		queries = append(queries, qs...)
		for _, q := range qs {
			if q.variable {
				vars[strings.TrimSpace(strings.SplitN(q.where, "variable", 2)[1])] = true
			}
		}
	}
	for _, v := range []string{"model", "instance", "gpu"} {
		assert.Truef(t, vars[v], "a dashboard has the variable %s", v)
	}
	// The metric names the dashboards use, to wait for in the scrape.
	wanted := map[string]bool{}
	for _, q := range queries {
		expr := substitute(q.expr)
		if m := labelValues.FindStringSubmatch(expr); m != nil {
			expr = m[1]
		}
		e, err := p.ParseExpr(expr)
		require.NoErrorf(t, err, "%s: %q", q.where, q.expr)
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok && vs.Name != "" {
				wanted[vs.Name] = true
			}
			return nil
		})
	}

	c, ports, sockDir := startShipped(t)
	tr := feedTraffic(t, ports, sockDir)
	waitForTraffic(t, c, ports.Addr("ui"), tr)
	// Not fatal: past the wait, the checks below name what is missing.
	var scraped map[string]map[string]bool
	assert.Eventually(t, func() bool {
		scraped = scrapeLabels(t, p, ports.Addr("prometheus"))
		for name := range wanted {
			if _, ok := scraped[name]; !ok {
				return false
			}
		}
		// Failed requests carry error_type once the connector flushed them.
		return scraped["inferprof_server_requests_total"]["error_type"]
	}, 30*time.Second, 200*time.Millisecond, "the scrape never held every metric the dashboards use: want %v", keys(wanted))

	for _, q := range queries {
		expr := substitute(q.expr)
		if q.variable {
			m := labelValues.FindStringSubmatch(expr)
			require.NotNilf(t, m, "%s: only label_values(selector, label) queries are used: %q", q.where, q.expr)
			matchers, err := p.ParseMetricSelector(m[1])
			require.NoErrorf(t, err, "%s: %q", q.where, q.expr)
			if name, ok := checkSelector(t, q.where, matchers, scraped); ok {
				assert.Truef(t, scraped[name][m[2]], "%s: %s has no label %s", q.where, name, m[2])
			}
			continue
		}
		e, err := p.ParseExpr(expr)
		require.NoErrorf(t, err, "%s: %q", q.where, q.expr)
		parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
			switch x := n.(type) {
			case *parser.VectorSelector:
				checkSelector(t, q.where, x.LabelMatchers, scraped)
			case *parser.AggregateExpr:
				// by (...) / without (...) name labels of the series below.
				have := map[string]bool{}
				parser.Inspect(x.Expr, func(n parser.Node, _ []parser.Node) error {
					if vs, ok := n.(*parser.VectorSelector); ok {
						for l := range scraped[vs.Name] {
							have[l] = true
						}
					}
					return nil
				})
				for _, l := range x.Grouping {
					assert.Truef(t, have[l], "%s: grouping by %s, a label the series do not have", q.where, l)
				}
			}
			return nil
		})
	}
	t.Logf("checked %d expressions against %d exported metrics", len(queries), len(scraped))
}
