// Copyright The inferprof Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/inferprof/inferprof/internal/e2etest"
)

// The docs check: what the docs show must work with the binary we build.
//
//   - Every collector config snippet in a Markdown file (a fenced block whose
//     YAML has a receivers/processors/exporters/connectors/extensions/service
//     key, or whose only key is a component type of the build) passes
//     `otelcol-inferprof validate`. A snippet without service.pipelines gets a
//     minimal one, and components a pipeline names but the snippet leaves
//     out are added with their defaults: snippets may elide, not invent.
//   - Every component a doc names in prose (`name` receiver, `a` and `b`
//     processors, a table row `| `name` | processor…`) is in the build,
//     unless its paragraph says it is "not in the build" or "cannot be built".
//
// A block can opt out with <!-- docs-check: skip (why) --> on the line
// before its fence; generated documentation.md files (mdatagen) are skipped.

// componentKinds are the collector config sections that hold components.
var componentKinds = []string{"receivers", "processors", "exporters", "connectors", "extensions"}

// buildComponents returns, per kind, the component types in the binary, as
// `otelcol-inferprof components` lists them, and for each connector the
// first signal pair (from, to) it supports.
func buildComponents(t *testing.T, bin string) (map[string][]string, map[string][2]string) {
	t.Helper()
	out, err := exec.Command(bin, "components").Output()
	require.NoError(t, err)
	var listing map[string]any
	require.NoError(t, yaml.Unmarshal(out, &listing))
	connectorSignals := map[string][2]string{}
	items, _ := listing["connectors"].([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		name, _ := m["name"].(string)
		stability, _ := m["stability"].(map[string]any)
		pairs := make([]string, 0, len(stability))
		for pair, level := range stability {
			if level != "Undefined" {
				pairs = append(pairs, pair)
			}
		}
		sort.Strings(pairs)
		require.NotEmptyf(t, pairs, "connector %s supports no signal pair", name)
		from, to, _ := strings.Cut(pairs[0], "-to-")
		connectorSignals[name] = [2]string{from, to}
	}
	kinds := map[string][]string{}
	for _, kind := range componentKinds {
		items, _ := listing[kind].([]any)
		for _, it := range items {
			m, _ := it.(map[string]any)
			if name, ok := m["name"].(string); ok {
				kinds[kind] = append(kinds[kind], name)
			}
		}
		require.NotEmptyf(t, kinds[kind], "components lists no %s", kind)
	}
	return kinds, connectorSignals
}

// docFiles are the Markdown files the check reads.
func docFiles(t *testing.T) []string {
	t.Helper()
	root := e2etest.RepoRoot()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", ".tools", ".bench", "node_modules", "build":
				return filepath.SkipDir
			}
			if rel == filepath.Join("cmd", "otelcol-inferprof") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".md") && d.Name() != "documentation.md" {
			files = append(files, rel)
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, files, "README.md")
	return files
}

// block is one fenced code block of a Markdown file.
type block struct {
	file string
	line int // of the opening fence, 1-based
	lang string
	body string
	skip bool // opted out
}

var fence = regexp.MustCompile("^(\\s*)(```|~~~)\\s*([A-Za-z0-9_+-]*)")

// codeBlocks splits Markdown into its fenced blocks and its prose; prose
// keeps one entry per line of the file (blank where a block was).
func codeBlocks(file, text string) (blocks []block, prose []string) {
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		m := fence.FindStringSubmatch(lines[i])
		if m == nil {
			prose = append(prose, lines[i])
			continue
		}
		indent, marker := m[1], m[2]
		b := block{file: file, line: i + 1, lang: m[3]}
		b.skip = i > 0 && strings.Contains(lines[i-1], "docs-check: skip")
		prose = append(prose, "")
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != marker; i++ {
			body = append(body, strings.TrimPrefix(lines[i], indent))
			prose = append(prose, "")
		}
		prose = append(prose, "") // the closing fence
		b.body = strings.Join(body, "\n")
		blocks = append(blocks, b)
	}
	return blocks, prose
}

// paragraph is prose lines joined up to a blank line, so a list of names
// wrapped over lines is read whole.
type paragraph struct {
	line int // first line, 1-based
	text string
}

func paragraphs(prose []string) []paragraph {
	var out []paragraph
	var cur []string
	start := 0
	flush := func() {
		if len(cur) > 0 {
			out = append(out, paragraph{line: start + 1, text: strings.Join(cur, " ")})
		}
		cur = nil
	}
	for i, l := range prose {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(strings.TrimSpace(l), "|") {
			flush() // table rows are read one by one
			continue
		}
		if len(cur) == 0 {
			start = i
		}
		cur = append(cur, strings.TrimSpace(l))
	}
	flush()
	return out
}

// kindOf returns the one kind holding component type typ, or "".
func kindOf(components map[string][]string, typ string) string {
	found := ""
	for kind, types := range components {
		if slices.Contains(types, typ) {
			if found != "" {
				return "" // ambiguous: prometheus, otlp
			}
			found = kind
		}
	}
	return found
}

func typeOf(id string) string {
	typ, _, _ := strings.Cut(id, "/")
	return typ
}

// asConfig turns a block into a collector config to validate, or nil if
// the block is no collector config.
func asConfig(b block, components map[string][]string) map[string]any {
	if b.lang != "" && b.lang != "yaml" && b.lang != "yml" {
		return nil
	}
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(b.body), &doc); err != nil || len(doc) == 0 {
		return nil
	}
	for k := range doc {
		if k == "service" || slices.Contains(componentKinds, k) {
			return doc
		}
	}
	// One component's settings alone, under its type: put it in its section.
	if len(doc) == 1 && (b.lang == "yaml" || b.lang == "yml") {
		for id, cfg := range doc {
			if kind := kindOf(components, typeOf(id)); kind != "" {
				return map[string]any{kind: map[string]any{id: cfg}}
			}
		}
	}
	return nil
}

func section(cfg map[string]any, key string) map[string]any {
	m, ok := cfg[key].(map[string]any)
	if !ok {
		m = map[string]any{}
		cfg[key] = m
	}
	return m
}

// complete adds what an excerpt leaves out, and nothing it states: a
// pipeline when there is none; otlp in and debug out for a pipeline that
// lists only its processors; the other side of a connector shown on one
// side only; and the components pipelines name but the snippet does not
// define, as config/default.yaml configures them (else their defaults).
func complete(cfg, shipped map[string]any, connectorSignals map[string][2]string) {
	svc := section(cfg, "service")
	pipelines := section(svc, "pipelines")
	if len(pipelines) == 0 {
		pipelines["traces"] = map[string]any{}
	}
	ids := func(p any, role string) []any {
		pm, _ := p.(map[string]any)
		l, _ := pm[role].([]any)
		return l
	}
	asReceiver, asExporter := map[string]bool{}, map[string]bool{}
	for _, p := range pipelines {
		for _, v := range ids(p, "receivers") {
			asReceiver[v.(string)] = true
		}
		for _, v := range ids(p, "exporters") {
			asExporter[v.(string)] = true
		}
	}
	for id := range asExporter {
		if sig, ok := connectorSignals[typeOf(id)]; ok && !asReceiver[id] {
			pipelines[sig[1]+"/docs-check-"+id] = map[string]any{"receivers": []any{id}}
		}
	}
	for id := range asReceiver {
		if sig, ok := connectorSignals[typeOf(id)]; ok && !asExporter[id] {
			pipelines[sig[0]+"/docs-check-"+id] = map[string]any{"exporters": []any{id}}
		}
	}
	for _, p := range pipelines {
		pm, _ := p.(map[string]any)
		if len(ids(pm, "receivers")) == 0 {
			pm["receivers"] = []any{"otlp"}
		}
		if len(ids(pm, "exporters")) == 0 {
			pm["exporters"] = []any{"debug"}
		}
		for _, role := range []string{"receivers", "processors", "exporters"} {
			for _, v := range ids(pm, role) {
				id, _ := v.(string)
				kind := role
				if _, ok := connectorSignals[typeOf(id)]; ok && role != "processors" {
					kind = "connectors"
				}
				sec := section(cfg, kind)
				if _, ok := sec[id]; !ok {
					sec[id] = section(shipped, kind)[id]
				}
			}
		}
	}
}

// docsChecker holds what both checks need: the binary, its components and
// the shipped default config that snippets elide from.
type docsChecker struct {
	bin              string
	components       map[string][]string
	connectorSignals map[string][2]string
	shipped          map[string]any
}

func newDocsChecker(t *testing.T) *docsChecker {
	t.Helper()
	c := &docsChecker{bin: e2etest.Binary(t)}
	c.components, c.connectorSignals = buildComponents(t, c.bin)
	b, err := os.ReadFile(shippedConfig("default.yaml"))
	require.NoError(t, err)
	require.NoError(t, yaml.Unmarshal(b, &c.shipped))
	return c
}

// snippets validates every collector config snippet of one Markdown file;
// it returns how many it checked and a message per one that fails.
func (c *docsChecker) snippets(t *testing.T, file, text string) (checked int, problems []string) {
	t.Helper()
	blocks, _ := codeBlocks(file, text)
	for _, b := range blocks {
		cfg := asConfig(b, c.components)
		if cfg == nil || b.skip {
			continue
		}
		checked++
		complete(cfg, c.shipped, c.connectorSignals)
		out, err := yaml.Marshal(cfg)
		require.NoError(t, err)
		path := filepath.Join(t.TempDir(), "config.yaml")
		require.NoError(t, os.WriteFile(path, out, 0o600))
		cmd := exec.Command(c.bin, "validate", "--config", path)
		cmd.Env = append(os.Environ(), "GRAPHSIGNAL_API_KEY=")
		if msg, err := cmd.CombinedOutput(); err != nil {
			problems = append(problems, fmt.Sprintf("%s:%d: the config snippet does not validate (%v):\n%s\nas validated:\n%s", b.file, b.line, err, msg, out))
		}
	}
	return checked, problems
}

var (
	kindWords = `(receiver|processor|exporter|connector|extension)s?\b`
	// "`a`, `b` and `c` exporters", "the `otlp` receiver"
	namesThenKind = regexp.MustCompile("((?:`[^`\\s]+`(?:\\s*,\\s*(?:and\\s+|or\\s+)?|\\s+(?:and|or)\\s+))*`[^`\\s]+`)\\s+" + kindWords)
	// a table row: "| `inference` | processor: ..."
	tableRow = regexp.MustCompile("^\\|\\s*`([^`\\s]+)`\\s*\\|\\s*" + kindWords)
	backtick = regexp.MustCompile("`([^`\\s]+)`")
	typeName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	// A paragraph may name a component outside the build if it says so.
	outsideBuild = regexp.MustCompile(`not in (the|this) build|cannot be built`)
)

// names checks the components one Markdown file names in prose; it returns
// how many it found and a message per one not in the build.
func (c *docsChecker) names(file, text string) (named int, problems []string) {
	_, prose := codeBlocks(file, text)
	type mention struct {
		line        int
		names, kind string
	}
	var found []mention
	for _, p := range paragraphs(prose) {
		if outsideBuild.MatchString(p.text) {
			continue // the paragraph says so itself
		}
		for _, m := range namesThenKind.FindAllStringSubmatch(p.text, -1) {
			found = append(found, mention{p.line, m[1], m[2]})
		}
	}
	for i, l := range prose {
		if m := tableRow.FindStringSubmatch(l); m != nil {
			found = append(found, mention{i + 1, "`" + m[1] + "`", m[2]})
		}
	}
	for _, m := range found {
		for _, n := range backtick.FindAllStringSubmatch(m.names, -1) {
			typ := typeOf(n[1])
			if !typeName.MatchString(typ) {
				continue // a path or an expression, not a component
			}
			named++
			if !slices.Contains(c.components[m.kind+"s"], typ) {
				problems = append(problems, fmt.Sprintf("%s:%d names %s %q, which is not in the build (otelcol-inferprof components); in the build: %s",
					file, m.line, m.kind, typ, strings.Join(sorted(c.components[m.kind+"s"]), ", ")))
			}
		}
	}
	return named, problems
}

// TestDocs runs both checks over every Markdown file in the repository.
func TestDocs(t *testing.T) {
	c := newDocsChecker(t)
	root := e2etest.RepoRoot()
	checked, named := 0, 0
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(filepath.Join(root, f))
		require.NoError(t, err)
		n, problems := c.snippets(t, f, string(b))
		checked += n
		for _, p := range problems {
			t.Error(p)
		}
		n, problems = c.names(f, string(b))
		named += n
		for _, p := range problems {
			t.Error(p)
		}
	}
	// Finding few means the extraction broke, not that the docs are clean.
	assert.GreaterOrEqual(t, checked, 5, "config snippets found")
	assert.GreaterOrEqual(t, named, 20, "component mentions found")
}

// TestDocsCheckCatchesDrift feeds the checks a page with the drift they
// exist for, so that a check that passes everything fails here.
func TestDocsCheckCatchesDrift(t *testing.T) {
	c := newDocsChecker(t)
	page := "# Drift\n\n" +
		"Run contrib's `k8sattributes` processor, and the `otlp` receiver.\n\n" +
		"The `groupbytrace` processor is not in the build, which is fine to say.\n\n" +
		"| component | kind |\n|---|---|\n| `tail_sampling` | processor |\n\n" +
		"```yaml\nreceivers:\n  nvml:\n    collection_interval: 10s\n    no_such_key: 1\n```\n\n" +
		"```yaml\nprocessors:\n  inference: {}\nservice:\n  pipelines:\n    traces:\n      processors: [inference]\n```\n\n" +
		"<!-- docs-check: skip (shows an error on purpose) -->\n```yaml\nreceivers:\n  nvml: {bad: 1}\n```\n"
	checked, problems := c.snippets(t, "drift.md", page)
	assert.Equal(t, 2, checked, "the opted-out block is not checked")
	require.Len(t, problems, 1, "%v", problems)
	assert.Contains(t, problems[0], "drift.md:11")
	assert.Contains(t, problems[0], "no_such_key")

	named, problems := c.names("drift.md", page)
	assert.Equal(t, 3, named, "k8sattributes, otlp and tail_sampling; the paragraph that says so is exempt")
	require.Len(t, problems, 2, "%v", problems)
	assert.Contains(t, problems[0], `drift.md:3 names processor "k8sattributes"`)
	assert.Contains(t, problems[1], `drift.md:9 names processor "tail_sampling"`)
}
