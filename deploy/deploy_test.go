package deploy

// These tests check the deployment files against each other and against
// the source they deploy: the variables cmd/paysync/config.go declares, the
// README's configuration table, the stream package's defaults, the linker
// variable of the version, the packages the image build needs. What needs a
// Docker engine, a cluster or a running systemd is out of reach; where a
// local tool can check a file offline (docker compose config,
// systemd-analyze) it is used, and skipped with the reason when absent.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.yaml.in/yaml/v3"

	"github.com/paysync/paysync/internal/natstest"
	"github.com/paysync/paysync/worker/stream"
)

// root is the module root, relative to this package's directory.
const root = ".."

// Paths and values the deployment files agree on.
const (
	stateDir   = "/var/lib/paysync"
	ledgerPath = stateDir + "/ledger.db"
	httpPort   = 9480
	rulesPath  = "/etc/paysync/rules.yaml"
	// duplicateWindow mirrors worker/stream's unexported duplicateWindow
	// (the README: "2 min duplicate window"); the embedded-server test
	// compares with what paysync really creates.
	duplicateWindow = 2 * time.Minute
)

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ---- the variables ----------------------------------------------------------

// envVar is one variable declared in cmd/paysync/config.go.
type envVar struct {
	name       string
	def        string
	hasDefault bool
	secret     bool // its field has the type secret
}

var envTagRE = regexp.MustCompile(`^\s*\w+\s+(\S+)\s+` + "`" + `env:"([A-Z][A-Z0-9_]*)(?:,\s*default=([^"]*))?"`)

// configVars parses the env tags of cmd/paysync/config.go.
func configVars(t *testing.T) []envVar {
	t.Helper()
	var vars []envVar
	sc := bufio.NewScanner(bytes.NewReader(read(t, filepath.Join(root, "cmd", "paysync", "config.go"))))
	for sc.Scan() {
		m := envTagRE.FindStringSubmatch(sc.Text())
		if m == nil {
			if strings.Contains(sc.Text(), `env:"`) {
				t.Fatalf("config.go: env tag this test cannot read: %s", sc.Text())
			}
			continue
		}
		vars = append(vars, envVar{name: m[2], def: m[3], hasDefault: strings.Contains(sc.Text(), "default="), secret: m[1] == "secret"})
	}
	if len(vars) < 30 {
		t.Fatalf("config.go: found only %d env tags; has the struct moved?", len(vars))
	}
	return vars
}

func configVar(t *testing.T, name string) envVar {
	t.Helper()
	for _, v := range configVars(t) {
		if v.name == name {
			return v
		}
	}
	t.Fatalf("config.go declares no %s", name)
	return envVar{}
}

// extraVars are read outside config.go and are still documented.
var extraVars = []string{"PAYSYNC_PASSWORD"}

// knownVars is every variable paysync reads.
func knownVars(t *testing.T) map[string]bool {
	known := map[string]bool{}
	for _, v := range configVars(t) {
		known[v.name] = true
	}
	for _, n := range extraVars {
		known[n] = true
	}
	return known
}

// readmeRow is one row of the README's configuration table.
type readmeRow struct {
	names []string
	def   string
}

var backtickName = regexp.MustCompile("`([A-Z][A-Z0-9_]*)`")

func readmeTable(t *testing.T) map[string]readmeRow {
	t.Helper()
	text := string(read(t, filepath.Join(root, "README.md")))
	_, sec, ok := strings.Cut(text, "\n## Configuration\n")
	if !ok {
		t.Fatal("README.md has no '## Configuration' section")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	rows := map[string]readmeRow{}
	for line := range strings.SplitSeq(sec, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, " | ")
		if len(cells) < 3 {
			t.Fatalf("README.md: configuration row with fewer than 3 cells: %s", line)
		}
		row := readmeRow{def: cells[1]}
		for _, m := range backtickName.FindAllStringSubmatch(cells[0], -1) {
			row.names = append(row.names, m[1])
		}
		for _, n := range row.names {
			rows[n] = row
		}
	}
	return rows
}

func TestReadmeDocumentsEveryVariable(t *testing.T) {
	rows := readmeTable(t)
	for _, v := range configVars(t) {
		row, ok := rows[v.name]
		if !ok {
			t.Errorf("README.md configuration table: no row for %s (declared in cmd/paysync/config.go)", v.name)
			continue
		}
		if v.hasDefault && !strings.Contains(row.def, "`"+v.def+"`") {
			t.Errorf("README.md: %s: default column %q does not show config.go's default `%s`", v.name, row.def, v.def)
		}
	}
	known := knownVars(t)
	for n := range rows {
		if !known[n] {
			t.Errorf("README.md documents %s, which paysync does not read (not in config.go nor %v)", n, extraVars)
		}
	}
}

// envFileLine is VAR=value, or "# VAR=value" for a default shown but unset.
var envFileLine = regexp.MustCompile(`^(# )?([A-Z][A-Z0-9_]*)=(.*)$`)

func TestEnvFile(t *testing.T) {
	const path = "examples/paysync.env"
	set := map[string]string{}   // VAR=value lines
	shown := map[string]string{} // every VAR, set or commented
	sc := bufio.NewScanner(bytes.NewReader(read(t, path)))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line != strings.TrimRight(line, " \t") {
			t.Errorf("%s:%d: trailing white space (docker --env-file keeps it in the value)", path, n)
		}
		m := envFileLine.FindStringSubmatch(line)
		switch {
		case m != nil:
			if _, dup := shown[m[2]]; dup {
				t.Errorf("%s:%d: %s appears twice", path, n, m[2])
			}
			shown[m[2]] = m[3]
			if m[1] == "" {
				set[m[2]] = m[3]
			}
			if strings.ContainsAny(m[3], `"'`) || strings.Contains(m[3], " #") {
				t.Errorf("%s:%d: quotes or an inline comment: systemd and docker --env-file read them differently", path, n)
			}
		case line == "" || strings.HasPrefix(line, "#"):
		default:
			t.Errorf("%s:%d: neither VAR=value, a comment nor blank: %q", path, n, line)
		}
	}
	known := knownVars(t)
	for _, v := range configVars(t) {
		val, ok := shown[v.name]
		switch {
		case !ok:
			t.Errorf("%s: %s (declared in cmd/paysync/config.go) is missing", path, v.name)
		case v.secret:
			if set[v.name] != "CHANGE_ME" {
				t.Errorf("%s: secret %s must be set to the placeholder CHANGE_ME, got %q", path, v.name, val)
			}
		case v.hasDefault && val != v.def:
			t.Errorf("%s: %s shows %q, but config.go's default is %q", path, v.name, val, v.def)
		}
	}
	for name := range readmeTable(t) {
		if _, ok := shown[name]; !ok {
			t.Errorf("%s: %s (in the README's configuration table) is missing", path, name)
		}
	}
	for name, val := range shown {
		if !known[name] {
			t.Errorf("%s: %s is not a variable paysync reads", path, name)
		}
		if _, isSet := set[name]; !isSet && val != "" && strings.Contains(strings.ToLower(name), "password") {
			t.Errorf("%s: %s shows a value", path, name)
		}
	}
	if set["PAYSYNC_PASSWORD"] != "" {
		t.Errorf("%s: PAYSYNC_PASSWORD is set; it is test only", path)
	}
}

// ---- Dockerfile -------------------------------------------------------------

// instruction is one Dockerfile instruction with its continuation lines
// joined.
type instruction struct {
	cmd  string // upper case
	args string
	line int
}

func parseDockerfile(t *testing.T, path string) []instruction {
	t.Helper()
	var out []instruction
	var cur strings.Builder
	start := 0
	sc := bufio.NewScanner(bytes.NewReader(read(t, path)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasPrefix(line, "#") { // a comment inside a continued instruction
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start})
		cur.Reset()
	}
	if cur.Len() > 0 {
		t.Fatalf("%s: ends inside a continued instruction", path)
	}
	return out
}

func TestDockerfile(t *testing.T) {
	const path = "Dockerfile"
	ins := parseDockerfile(t, path)

	// Stages, with global ARG defaults expanded in FROM.
	globals := map[string]string{}
	var stages [][]instruction
	for _, in := range ins {
		switch {
		case in.cmd == "ARG" && len(stages) == 0:
			k, v, _ := strings.Cut(in.args, "=")
			globals[k] = v
		case in.cmd == "FROM":
			stages = append(stages, []instruction{in})
		case len(stages) == 0:
			t.Fatalf("%s:%d: %s before the first FROM", path, in.line, in.cmd)
		default:
			stages[len(stages)-1] = append(stages[len(stages)-1], in)
		}
	}
	if len(stages) != 2 {
		t.Fatalf("%s: %d stages, want 2 (build, runtime)", path, len(stages))
	}
	expand := func(s string) string {
		return os.Expand(s, func(k string) string {
			if v, ok := globals[k]; ok {
				return v
			}
			return "$" + k
		})
	}
	build, final := stages[0], stages[1]
	if from := expand(build[0].args); !strings.Contains(from, " golang:1.26 AS build") {
		t.Errorf("%s: build stage FROM %q, want golang:1.26 AS build", path, from)
	}
	if from := final[0].args; from != "gcr.io/distroless/static-debian12:nonroot" {
		t.Errorf("%s: final stage FROM %q, want gcr.io/distroless/static-debian12:nonroot", path, from)
	}

	var goBuild string
	for _, in := range build {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			goBuild = in.args
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "go build -trimpath", `-ldflags "-s -w -X github.com/paysync/paysync.version=${VERSION}"`, "./cmd/paysync"} {
		if !strings.Contains(goBuild, want) {
			t.Errorf("%s: the go build step lacks %s: %s", path, want, goBuild)
		}
	}
	// -X silently does nothing when the variable does not exist: check it.
	checkVersionVar(t)

	byCmd := map[string][]string{}
	for _, in := range final[1:] {
		byCmd[in.cmd] = append(byCmd[in.cmd], in.args)
	}
	one := func(cmd string) string {
		t.Helper()
		if len(byCmd[cmd]) != 1 {
			t.Errorf("%s: final stage has %d %s, want 1", path, len(byCmd[cmd]), cmd)
			return ""
		}
		return byCmd[cmd][0]
	}
	// USER: numeric (Kubernetes' runAsNonRoot cannot check a name) and not root.
	user, _, _ := strings.Cut(one("USER"), ":")
	if uid, err := strconv.Atoi(user); err != nil || uid == 0 {
		t.Errorf("%s: USER %q: want a numeric non-root uid (65532, distroless nonroot)", path, one("USER"))
	}
	execForm := func(cmd, args string) []string {
		t.Helper()
		var v []string
		if err := json.Unmarshal([]byte(args), &v); err != nil {
			t.Errorf("%s: %s %s: not the exec (JSON) form: distroless has no shell", path, cmd, args)
		}
		return v
	}
	if got := execForm("ENTRYPOINT", one("ENTRYPOINT")); !slices.Equal(got, []string{"/paysync"}) {
		t.Errorf("%s: ENTRYPOINT %q", path, got)
	}
	if got := execForm("CMD", one("CMD")); !slices.Equal(got, []string{"run"}) {
		t.Errorf("%s: CMD %q", path, got)
	}
	hc := one("HEALTHCHECK")
	opts, cmd, ok := strings.Cut(hc, "CMD ")
	if !ok {
		t.Fatalf("%s: HEALTHCHECK without CMD: %s", path, hc)
	}
	probe := execForm("HEALTHCHECK CMD", cmd)
	if want := []string{"/paysync", "healthcheck", fmt.Sprintf("http://127.0.0.1:%d/healthz", httpPort)}; !slices.Equal(probe, want) {
		t.Errorf("%s: HEALTHCHECK CMD %q, want %q", path, probe, want)
	}
	if !strings.Contains(opts, "--timeout=") || !strings.Contains(opts, "--interval=") {
		t.Errorf("%s: HEALTHCHECK without --interval/--timeout: %s", path, opts)
	}
	checkSubcommand(t, "healthcheck")
	if v := one("VOLUME"); v != stateDir {
		t.Errorf("%s: VOLUME %q, want %s", path, v, stateDir)
	}
	if v := one("EXPOSE"); v != strconv.Itoa(httpPort) {
		t.Errorf("%s: EXPOSE %q, want %d", path, v, httpPort)
	}
	env := map[string]string{}
	for _, e := range byCmd["ENV"] {
		for f := range strings.FieldsSeq(e) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				t.Errorf("%s: ENV %q: use the KEY=value form", path, e)
			}
			env[k] = v
		}
	}
	if env["PAYSYNC_LEDGER"] != ledgerPath {
		t.Errorf("%s: PAYSYNC_LEDGER=%q, want %s", path, env["PAYSYNC_LEDGER"], ledgerPath)
	}
	if env["PAYSYNC_HTTP_ADDR"] != fmt.Sprintf("0.0.0.0:%d", httpPort) {
		t.Errorf("%s: PAYSYNC_HTTP_ADDR=%q: in a container the listener must not be on loopback", path, env["PAYSYNC_HTTP_ADDR"])
	}
	known := knownVars(t)
	for k := range env {
		if !known[k] {
			t.Errorf("%s: ENV %s is not a variable paysync reads", path, k)
		}
	}
	// The state directory (with the inbox) is created for nonroot: a new
	// volume copies it, and distroless has no mkdir.
	var copied bool
	for _, c := range byCmd["COPY"] {
		if strings.Contains(c, "--chown=65532:65532") && strings.Contains(c, "/var/lib/") {
			copied = true
		}
	}
	var made bool
	for _, in := range build {
		if in.cmd == "RUN" && strings.Contains(in.args, "mkdir -p /out"+stateDir+"/inbox") && strings.Contains(in.args, "0700") {
			made = true
		}
	}
	if !copied || !made {
		t.Errorf("%s: the state directory %s (and its inbox) must be created 0700 in the build stage and copied --chown=65532:65532", path, stateDir)
	}
}

// checkVersionVar checks that the -X target of the Dockerfile exists: a
// package-level string variable version in the module's root package.
func checkVersionVar(t *testing.T) {
	t.Helper()
	pkgs, err := parser.ParseDir(token.NewFileSet(), root, func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	pkg := pkgs["paysync"]
	if pkg == nil {
		t.Fatal("no package paysync at the module root")
	}
	for _, f := range pkg.Files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for _, n := range vs.Names {
					if n.Name == "version" {
						return
					}
				}
			}
		}
	}
	t.Error("package paysync has no variable version: -X github.com/paysync/paysync.version would set nothing")
}

// checkSubcommand checks that cmd/paysync registers the subcommand name.
func checkSubcommand(t *testing.T, name string) {
	t.Helper()
	if !bytes.Contains(read(t, filepath.Join(root, "cmd", "paysync", "app.go")), []byte(`{"`+name+`", `)) {
		t.Errorf("cmd/paysync/app.go registers no %q subcommand, which the deployment files run", name)
	}
}

// ---- the build context ------------------------------------------------------

// ignorePattern is one line of a .dockerignore, compiled the way
// github.com/moby/patternmatcher does: '*' and '?' within a path element,
// '**' across them; a pattern that matches a directory matches what is in it.
type ignorePattern struct {
	re      *regexp.Regexp
	exclude bool // a "!" line
}

func parseIgnore(t *testing.T, path string) []ignorePattern {
	t.Helper()
	var ps []ignorePattern
	sc := bufio.NewScanner(bytes.NewReader(read(t, path)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(sc.Text(), "#") {
			continue
		}
		p := ignorePattern{}
		if rest, ok := strings.CutPrefix(line, "!"); ok {
			p.exclude, line = true, rest
		}
		line = strings.TrimPrefix(filepath.Clean(line), "/")
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(line); i++ {
			switch c := line[i]; {
			case strings.HasPrefix(line[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(line[i:], "**"):
				re.WriteString(".*")
				i++
			case c == '*':
				re.WriteString("[^/]*")
			case c == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(string(c)))
			}
		}
		re.WriteString("$")
		p.re = regexp.MustCompile(re.String())
		ps = append(ps, p)
	}
	return ps
}

// ignored reports whether the context path p (slash-separated) is left out.
func ignored(ps []ignorePattern, p string) bool {
	var prefixes []string
	for i := range p {
		if p[i] == '/' {
			prefixes = append(prefixes, p[:i])
		}
	}
	prefixes = append(prefixes, p)
	out := false
	for _, pat := range ps {
		for _, q := range prefixes {
			if pat.re.MatchString(q) {
				out = !pat.exclude
				break
			}
		}
	}
	return out
}

func TestDockerIgnore(t *testing.T) {
	ps := parseIgnore(t, "Dockerfile.dockerignore")
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the build's files")
	}
	// Every file the image build reads: module packages' Go and embedded
	// files, and go.mod/go.sum.
	cmd := exec.Command(goCmd, "list", "-deps", "-f",
		`{{with .Module}}{{if eq .Path "github.com/paysync/paysync"}}{{$.Dir}}{{range $.GoFiles}} {{.}}{{end}}{{range $.EmbedFiles}} {{.}}{{end}}{{"\n"}}{{end}}{{end}}`,
		"./cmd/paysync")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	needed := []string{"go.mod", "go.sum"}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		rel, err := filepath.Rel(abs, f[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range f[1:] {
			needed = append(needed, filepath.ToSlash(filepath.Join(rel, name)))
		}
	}
	if len(needed) < 20 {
		t.Fatalf("go list found only %d files: %s", len(needed), out)
	}
	for _, p := range needed {
		if ignored(ps, p) {
			t.Errorf("Dockerfile.dockerignore leaves out %s, which the build needs", p)
		}
	}
	for _, p := range []string{".git/config", "ledger.db", "x/y/ledger.db-wal", "token.json", ".env", "deploy/compose.yaml", "paysync", "cmd/paysync/paysync.test"} {
		if !ignored(ps, p) {
			t.Errorf("Dockerfile.dockerignore lets %s into the build context", p)
		}
	}
}

// ---- compose ----------------------------------------------------------------

type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string         `yaml:"image"`
	Build       *composeBuild  `yaml:"build"`
	Command     []string       `yaml:"command"`
	Environment map[string]any `yaml:"environment"`
	Volumes     []string       `yaml:"volumes"`
	Ports       []string       `yaml:"ports"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	StopGracePeriod string   `yaml:"stop_grace_period"`
	Privileged      bool     `yaml:"privileged"`
	ReadOnly        bool     `yaml:"read_only"`
	CapDrop         []string `yaml:"cap_drop"`
	NetworkMode     string   `yaml:"network_mode"`
}

type composeBuild struct {
	Context    string `yaml:"context"`
	Dockerfile string `yaml:"dockerfile"`
}

func TestCompose(t *testing.T) {
	var c composeFile
	if err := yaml.Unmarshal(read(t, "compose.yaml"), &c); err != nil {
		t.Fatalf("compose.yaml: %v", err)
	}
	for _, name := range []string{"nats", "sandbox", "paysync"} {
		if _, ok := c.Services[name]; !ok {
			t.Errorf("compose.yaml: no service %s", name)
		}
	}
	for name, s := range c.Services {
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("compose.yaml: %s publishes %q beyond loopback", name, p)
			}
		}
		if s.Privileged || s.NetworkMode == "host" {
			t.Errorf("compose.yaml: %s is privileged or on the host network", name)
		}
		for _, v := range s.Volumes {
			src, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(src, ".") {
				if _, err := os.Stat(src); err != nil {
					t.Errorf("compose.yaml: %s mounts %s: %v", name, src, err)
				}
			} else if _, ok := c.Volumes[src]; !ok {
				t.Errorf("compose.yaml: %s mounts the undeclared volume %s", name, src)
			}
		}
		if s.Build != nil {
			df, _ := filepath.Abs(filepath.Join(s.Build.Context, s.Build.Dockerfile))
			if here, _ := filepath.Abs("Dockerfile"); df != here {
				t.Errorf("compose.yaml: %s builds %s (relative to deploy/), want this directory's Dockerfile", name, df)
			}
			if filepath.Clean(s.Build.Context) != root {
				t.Errorf("compose.yaml: %s: build context %s, want the module root %s", name, s.Build.Context, root)
			}
		}
	}

	nats := c.Services["nats"]
	if nats.Image != "nats:2.11" {
		t.Errorf("compose.yaml: nats image %q", nats.Image)
	}
	if args := strings.Join(nats.Command, " "); !strings.Contains(args, "-js") || !strings.Contains(args, "-sd /data") {
		t.Errorf("compose.yaml: nats command %q: want JetStream (-js) storing in /data (-sd /data)", args)
	}
	if !slices.ContainsFunc(nats.Volumes, func(v string) bool { return strings.HasSuffix(v, ":/data") }) {
		t.Errorf("compose.yaml: nats keeps /data in no volume")
	}

	sb := c.Services["sandbox"]
	if sb.Build == nil || !slices.Equal(sb.Command, []string{"sandbox", "--addr", "0.0.0.0:8765"}) {
		t.Errorf("compose.yaml: sandbox: build %v, command %q", sb.Build, sb.Command)
	}
	if sb.Healthcheck == nil || len(sb.Healthcheck.Test) < 3 || sb.Healthcheck.Test[0] != "CMD" || sb.Healthcheck.Test[2] != "healthcheck" {
		t.Errorf("compose.yaml: sandbox healthcheck %+v: want [CMD /paysync healthcheck URL] (the image has no shell)", sb.Healthcheck)
	}

	ps := c.Services["paysync"]
	if ps.Build == nil {
		t.Error("compose.yaml: paysync is not built from the Dockerfile")
	}
	want := map[string]string{
		"NATS_URL":              "nats://nats:4222",
		"PAYSYNC_PAYROLL_URL":   "http://sandbox:8765",
		"PAYSYNC_AUTH_URL":      "http://sandbox:8765",
		"PAYSYNC_AUTH_REALM":    "danlon-sandbox",
		"PAYSYNC_CLIENT_ID":     "paysync-sandbox",
		"PAYSYNC_CLIENT_SECRET": "sandbox-secret",
		"PAYSYNC_MAPPING":       rulesPath,
		"PAYSYNC_INBOX":         stateDir + "/inbox",
		"PAYSYNC_LEDGER":        ledgerPath,
		"PAYSYNC_HTTP_ADDR":     fmt.Sprintf("0.0.0.0:%d", httpPort),
	}
	known := knownVars(t)
	for k, v := range ps.Environment {
		if !known[k] {
			t.Errorf("compose.yaml: paysync sets %s, which paysync does not read", k)
		}
		if _, ok := v.(string); !ok {
			t.Errorf("compose.yaml: paysync: %s is %T, want a string", k, v)
		}
	}
	for k, v := range want {
		if got := ps.Environment[k]; got != v {
			t.Errorf("compose.yaml: paysync: %s=%v, want %s", k, got, v)
		}
	}
	if _, ok := ps.Environment["PAYSYNC_REFRESH_TOKEN"]; ok {
		t.Error("compose.yaml: paysync sets PAYSYNC_REFRESH_TOKEN; the token comes from `auth password --save` into the ledger volume")
	}
	if !slices.Contains(ps.Volumes, "./examples/rules.yaml:"+rulesPath+":ro") {
		t.Errorf("compose.yaml: paysync volumes %q: want ./examples/rules.yaml mounted read-only at %s", ps.Volumes, rulesPath)
	}
	if !slices.ContainsFunc(ps.Volumes, func(v string) bool { return strings.HasSuffix(v, ":"+stateDir) && !strings.HasPrefix(v, ".") }) {
		t.Errorf("compose.yaml: paysync keeps %s in no named volume", stateDir)
	}
	if ps.DependsOn["nats"].Condition == "" || ps.DependsOn["sandbox"].Condition != "service_healthy" {
		t.Errorf("compose.yaml: paysync depends_on %+v: want nats, and sandbox healthy", ps.DependsOn)
	}
	grace := shutdownGrace(t, ps.Environment["PAYSYNC_SHUTDOWN_GRACE"])
	if d, err := time.ParseDuration(ps.StopGracePeriod); err != nil || d <= grace {
		t.Errorf("compose.yaml: paysync stop_grace_period %q: want more than PAYSYNC_SHUTDOWN_GRACE %s", ps.StopGracePeriod, grace)
	}
	if !ps.ReadOnly || !slices.Contains(ps.CapDrop, "ALL") {
		t.Errorf("compose.yaml: paysync: want read_only and cap_drop ALL")
	}
}

// shutdownGrace is PAYSYNC_SHUTDOWN_GRACE as set (v, if a string), else
// config.go's default.
func shutdownGrace(t *testing.T, v any) time.Duration {
	t.Helper()
	s, _ := v.(string)
	if s == "" {
		s = configVar(t, "PAYSYNC_SHUTDOWN_GRACE").def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("PAYSYNC_SHUTDOWN_GRACE %q: %v", s, err)
	}
	return d
}

func TestComposeConfig(t *testing.T) {
	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("docker CLI not installed: compose.yaml not checked by docker compose")
	}
	if out, err := exec.Command(docker, "compose", "version").CombinedOutput(); err != nil {
		t.Skipf("the docker compose plugin is not installed (docker compose version: %s): compose.yaml not checked by docker compose", strings.TrimSpace(string(out)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, docker, "compose", "-f", "compose.yaml", "config", "-q")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("docker compose config -q: %v\n%s", err, out)
	}
}

// ---- systemd ----------------------------------------------------------------

// unitFile maps section → key → values (keys may repeat).
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	u := unitFile{}
	sec := ""
	sc := bufio.NewScanner(bytes.NewReader(read(t, path)))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			sec = line[1 : len(line)-1]
			u[sec] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || sec == "" {
				t.Fatalf("%s:%d: not key=value in a section: %s", path, n, line)
			}
			u[sec][k] = append(u[sec][k], v)
		}
	}
	return u
}

const unitPath = "systemd/paysync.service"

func TestSystemdUnit(t *testing.T) {
	u := parseUnit(t, unitPath)
	svc := u["Service"]
	if svc == nil {
		t.Fatal("no [Service] section")
	}
	want := map[string]string{
		"DynamicUser":             "yes",
		"StateDirectory":          "paysync paysync/inbox",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"NoNewPrivileges":         "yes",
		"CapabilityBoundingSet":   "",
		"RestrictAddressFamilies": "AF_INET AF_INET6 AF_UNIX",
		"MemoryDenyWriteExecute":  "yes",
		"LockPersonality":         "yes",
		"RestrictNamespaces":      "yes",
		"UMask":                   "0077",
		"EnvironmentFile":         "/etc/paysync/paysync.env",
		"ExecStart":               "/usr/local/bin/paysync run",
		"Restart":                 "on-failure",
		"KillSignal":              "SIGTERM",
		"Environment":             "PAYSYNC_LEDGER=%S/paysync/ledger.db",
	}
	for k, v := range want {
		if got := svc[k]; !slices.Contains(got, v) {
			t.Errorf("%s: %s=%q, want %q", unitPath, k, got, v)
		}
	}
	if !slices.Contains(svc["SystemCallFilter"], "@system-service") {
		t.Errorf("%s: SystemCallFilter %q lacks @system-service", unitPath, svc["SystemCallFilter"])
	}
	stop, err := strconv.Atoi(strings.Join(svc["TimeoutStopSec"], ""))
	if grace := shutdownGrace(t, nil); err != nil || time.Duration(stop)*time.Second <= grace {
		t.Errorf("%s: TimeoutStopSec=%q: want more seconds than PAYSYNC_SHUTDOWN_GRACE's default %s", unitPath, svc["TimeoutStopSec"], grace)
	}
	for _, e := range svc["Environment"] {
		k, _, _ := strings.Cut(e, "=")
		if !knownVars(t)[k] {
			t.Errorf("%s: Environment=%s: not a variable paysync reads", unitPath, e)
		}
	}
	if u["Install"] == nil || !slices.Contains(u["Install"]["WantedBy"], "multi-user.target") {
		t.Errorf("%s: not WantedBy=multi-user.target", unitPath)
	}
}

// TestSystemdAnalyze runs systemd-analyze verify (unknown keys, bad values)
// and an offline security review on the unit, with ExecStart pointed at an
// executable that exists here (verify checks that it does).
func TestSystemdAnalyze(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed: the unit is not verified by systemd")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	unit := strings.ReplaceAll(string(read(t, unitPath)), "ExecStart=/usr/local/bin/paysync run", "ExecStart="+self+" run")
	path := filepath.Join(t.TempDir(), "paysync.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, sa, "verify", "--man=no", path).CombinedOutput()
	// verify exits 0 on unknown keys: every line about the unit is a
	// finding; other lines (about the host's own units) are only logged.
	if err != nil {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		switch {
		case strings.Contains(line, "paysync.service"):
			t.Errorf("systemd-analyze verify: %s", line)
		case line != "":
			t.Logf("systemd-analyze verify (not about the unit): %s", line)
		}
	}
	// Exposure 0.0 (best) .. 10.0; --threshold is in tenths. 2.0 and below
	// is systemd's "OK".
	out, err = exec.CommandContext(ctx, sa, "security", "--offline=true", "--threshold=20", path).CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Errorf("systemd-analyze security: exposure above 2.0:\n%s", out)
		} else {
			t.Skipf("systemd-analyze security --offline unavailable: %v", err)
		}
	}
	if i := bytes.Index(out, []byte("Overall exposure level")); i >= 0 {
		t.Log(strings.TrimSpace(string(out[i:])))
	}
}

// ---- Kubernetes -------------------------------------------------------------

// decodeDocs decodes every YAML document of a file into a generic tree.
func decodeDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(read(t, path)))
	var docs []map[string]any
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// get walks a generic tree by keys (strings) and indexes (ints).
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

func str(v any) string { s, _ := v.(string); return s }

// k8sObjects reads every manifest under kubernetes/, by kind and name.
func k8sObjects(t *testing.T) map[string]map[string]any {
	t.Helper()
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	objs := map[string]map[string]any{}
	for _, f := range files {
		for _, d := range decodeDocs(t, f) {
			kind, name := str(d["kind"]), str(get(d, "metadata", "name"))
			if str(d["apiVersion"]) == "" || kind == "" || name == "" {
				t.Errorf("%s: a document without apiVersion, kind or metadata.name", f)
				continue
			}
			if get(d, "metadata", "namespace") != nil {
				t.Errorf("%s: %s/%s has a namespace; the manifests are namespace-less", f, kind, name)
			}
			objs[kind+"/"+name] = d
		}
	}
	return objs
}

func TestKubernetes(t *testing.T) {
	objs := k8sObjects(t)
	for _, k := range []string{"StatefulSet/paysync", "Service/paysync", "Secret/paysync", "ConfigMap/paysync-env", "ConfigMap/paysync-rules"} {
		if objs[k] == nil {
			t.Fatalf("kubernetes/: no %s (have %v)", k, slices.Sorted(maps.Keys(objs)))
		}
	}
	ss := objs["StatefulSet/paysync"]
	if str(ss["apiVersion"]) != "apps/v1" {
		t.Errorf("StatefulSet apiVersion %v", ss["apiVersion"])
	}
	if get(ss, "spec", "replicas") != 1 {
		t.Errorf("StatefulSet replicas %v, want 1 (one ledger, one refresh token)", get(ss, "spec", "replicas"))
	}
	pod := get(ss, "spec", "template")
	podLabels, _ := get(pod, "metadata", "labels").(map[string]any)
	selector, _ := get(ss, "spec", "selector", "matchLabels").(map[string]any)
	if len(selector) == 0 || !subset(selector, podLabels) {
		t.Errorf("StatefulSet selector %v does not select its pod labels %v", selector, podLabels)
	}
	spec := get(pod, "spec")
	grace, _ := get(spec, "terminationGracePeriodSeconds").(int)
	cm := objs["ConfigMap/paysync-env"]
	if time.Duration(grace)*time.Second <= shutdownGrace(t, get(cm, "data", "PAYSYNC_SHUTDOWN_GRACE")) {
		t.Errorf("terminationGracePeriodSeconds %d: want more than PAYSYNC_SHUTDOWN_GRACE", grace)
	}
	if get(spec, "securityContext", "runAsNonRoot") != true {
		t.Error("pod securityContext: runAsNonRoot is not true")
	}
	if uid, _ := get(spec, "securityContext", "runAsUser").(int); uid == 0 {
		t.Error("pod securityContext: runAsUser is root or unset")
	}
	containers, _ := get(spec, "containers").([]any)
	if len(containers) != 1 {
		t.Fatalf("%d containers, want 1", len(containers))
	}
	c := containers[0]
	sc := get(c, "securityContext")
	if get(sc, "readOnlyRootFilesystem") != true || get(sc, "allowPrivilegeEscalation") != false || get(sc, "runAsNonRoot") != true {
		t.Errorf("container securityContext %v: want readOnlyRootFilesystem, no privilege escalation, runAsNonRoot", sc)
	}
	if drop, _ := get(sc, "capabilities", "drop").([]any); !slices.Contains(drop, any("ALL")) || get(sc, "capabilities", "add") != nil {
		t.Errorf("container capabilities %v: want drop [ALL] and nothing added", get(sc, "capabilities"))
	}
	// Nothing privileged anywhere in any manifest.
	for k, o := range objs {
		walk(o, func(path string, key string, v any) {
			switch {
			case key == "privileged" && v != false,
				(key == "hostNetwork" || key == "hostPID" || key == "hostIPC") && v != false,
				key == "allowPrivilegeEscalation" && v != false,
				key == "hostPath":
				t.Errorf("%s: %s%s = %v", k, path, key, v)
			}
		})
	}

	// The port, the probes and the scrape annotations agree.
	port := 0
	portName := ""
	if ports, _ := get(c, "ports").([]any); len(ports) == 1 {
		port, _ = get(ports[0], "containerPort").(int)
		portName = str(get(ports[0], "name"))
	}
	if port != httpPort {
		t.Fatalf("container port %d, want %d", port, httpPort)
	}
	probe := func(kind, path string) {
		t.Helper()
		p := get(c, kind, "httpGet")
		if str(get(p, "path")) != path {
			t.Errorf("%s path %v, want %s", kind, get(p, "path"), path)
		}
		if pp := get(p, "port"); pp != port && (portName == "" || pp != portName) {
			t.Errorf("%s port %v, want %d", kind, pp, port)
		}
	}
	probe("livenessProbe", "/healthz")
	probe("readinessProbe", "/readyz")
	if get(c, "startupProbe") != nil {
		probe("startupProbe", "/healthz")
	}
	ann, _ := get(pod, "metadata", "annotations").(map[string]any)
	if ann["prometheus.io/scrape"] != "true" || ann["prometheus.io/port"] != strconv.Itoa(port) || ann["prometheus.io/path"] != "/metrics" {
		t.Errorf("pod annotations %v: want prometheus.io/scrape \"true\", port %q, path /metrics", ann, strconv.Itoa(port))
	}

	// envFrom: the ConfigMap and the Secret of these manifests.
	var refs []string
	envFrom, _ := get(c, "envFrom").([]any)
	for _, e := range envFrom {
		if n := str(get(e, "configMapRef", "name")); n != "" {
			refs = append(refs, "ConfigMap/"+n)
		}
		if n := str(get(e, "secretRef", "name")); n != "" {
			refs = append(refs, "Secret/"+n)
		}
	}
	slices.Sort(refs)
	if !slices.Equal(refs, []string{"ConfigMap/paysync-env", "Secret/paysync"}) {
		t.Errorf("envFrom %v: want ConfigMap/paysync-env and Secret/paysync", refs)
	}

	// Volumes: every mount has a volume or a claim template; the state
	// directory is the claim.
	vols := map[string]any{}
	for _, v := range asList(get(spec, "volumes")) {
		vols[str(get(v, "name"))] = v
	}
	claims := map[string]bool{}
	for _, v := range asList(get(ss, "spec", "volumeClaimTemplates")) {
		claims[str(get(v, "metadata", "name"))] = true
	}
	mounts := map[string]string{} // path → volume
	for _, m := range asList(get(c, "volumeMounts")) {
		n := str(get(m, "name"))
		if vols[n] == nil && !claims[n] {
			t.Errorf("volumeMount %s: no such volume or claim template", n)
		}
		mounts[str(get(m, "mountPath"))] = n
	}
	if !claims[mounts[stateDir]] {
		t.Errorf("%s is not on a volumeClaimTemplate (mounts %v)", stateDir, mounts)
	}
	if n := str(get(vols[mounts[filepath.Dir(rulesPath)]], "configMap", "name")); n != "paysync-rules" {
		t.Errorf("%s is not the paysync-rules ConfigMap", filepath.Dir(rulesPath))
	}
	if _, ok := mounts["/tmp"]; !ok {
		t.Error("no writable /tmp with readOnlyRootFilesystem")
	}

	// The Service selects the pod and targets its port.
	svc := objs["Service/paysync"]
	if typ := get(svc, "spec", "type"); typ != nil && typ != "ClusterIP" {
		t.Errorf("Service type %v, want ClusterIP", typ)
	}
	if sel, _ := get(svc, "spec", "selector").(map[string]any); len(sel) == 0 || !subset(sel, podLabels) {
		t.Errorf("Service selector %v does not select the pod %v", sel, podLabels)
	}
	if tp := get(svc, "spec", "ports", 0, "targetPort"); tp != port && tp != portName {
		t.Errorf("Service targetPort %v, want %d or %q", tp, port, portName)
	}
	if str(get(ss, "spec", "serviceName")) != "paysync" {
		t.Errorf("StatefulSet serviceName %v", get(ss, "spec", "serviceName"))
	}
}

func TestKubernetesConfig(t *testing.T) {
	objs := k8sObjects(t)
	vars := configVars(t)
	known := knownVars(t)

	// Every ConfigMap value is a string (an unquoted true or 100 would be
	// rejected by the API server), and a variable paysync reads; no secret.
	cm := objs["ConfigMap/paysync-env"]
	data, _ := cm["data"].(map[string]any)
	for k, v := range data {
		if _, ok := v.(string); !ok {
			t.Errorf("ConfigMap paysync-env: %s is %T, want a string (quote it)", k, v)
		}
		if !known[k] {
			t.Errorf("ConfigMap paysync-env: %s is not a variable paysync reads", k)
		}
	}
	for _, v := range vars {
		if _, ok := data[v.name]; ok && v.secret {
			t.Errorf("ConfigMap paysync-env: %s is a secret: it belongs in the Secret", v.name)
		}
	}
	for k, v := range map[string]string{"PAYSYNC_LEDGER": ledgerPath, "PAYSYNC_HTTP_ADDR": fmt.Sprintf("0.0.0.0:%d", httpPort), "PAYSYNC_MAPPING": rulesPath} {
		if data[k] != v {
			t.Errorf("ConfigMap paysync-env: %s=%v, want %s", k, data[k], v)
		}
	}
	for _, k := range []string{"PAYSYNC_PAYROLL_URL", "PAYSYNC_CLIENT_ID", "NATS_URL"} {
		if str(data[k]) == "" {
			t.Errorf("ConfigMap paysync-env: %s is not set", k)
		}
	}

	// The rules are deploy/examples/rules.yaml, and they parse.
	rules := str(get(objs["ConfigMap/paysync-rules"], "data", filepath.Base(rulesPath)))
	if rules != string(read(t, "examples/rules.yaml")) {
		t.Error("ConfigMap paysync-rules: rules.yaml differs from deploy/examples/rules.yaml")
	}

	// The Secret: stringData placeholders for exactly the secret variables.
	sec := objs["Secret/paysync"]
	sd, _ := sec["stringData"].(map[string]any)
	var want, got []string
	for _, v := range vars {
		if v.secret {
			want = append(want, v.name)
		}
	}
	for k, v := range sd {
		got = append(got, k)
		if v != "CHANGE_ME" {
			t.Errorf("Secret paysync: %s is %q, want the placeholder CHANGE_ME", k, v)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("Secret paysync: stringData keys %v, want the secret variables %v", got, want)
	}
	if sec["data"] != nil {
		t.Error("Secret paysync: example with data (base64); use stringData")
	}
}

func asList(v any) []any { l, _ := v.([]any); return l }

func subset(a, b map[string]any) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// walk calls fn for every key of every map in v.
func walk(v any, fn func(path, key string, v any)) {
	var rec func(path string, v any)
	rec = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				fn(path, k, e)
				rec(path+k+".", e)
			}
		case []any:
			for i, e := range x {
				rec(path+strconv.Itoa(i)+".", e)
			}
		}
	}
	rec("", v)
}

// ---- NATS -------------------------------------------------------------------

// decodeStrict decodes a JSON file into v, refusing unknown fields (the
// jetstream types carry the server's JSON names).
func decodeStrict(t *testing.T, path string, v any) []byte {
	t.Helper()
	b := read(t, path)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}

func TestNATSFiles(t *testing.T) {
	var sc jetstream.StreamConfig
	decodeStrict(t, "nats/stream.json", &sc)
	if sc.Name != stream.DefaultStream || !slices.Equal(sc.Subjects, []string{stream.DefaultSubject}) ||
		sc.Storage != jetstream.FileStorage || sc.Retention != jetstream.WorkQueuePolicy || sc.Duplicates != duplicateWindow {
		t.Errorf("nats/stream.json: %+v: want stream %s, subjects [%s], file storage, work queue, duplicate window %s",
			sc, stream.DefaultStream, stream.DefaultSubject, duplicateWindow)
	}
	var cc jetstream.ConsumerConfig
	decodeStrict(t, "nats/consumer.json", &cc)
	if cc.Durable != stream.DefaultDurable || cc.FilterSubject != stream.DefaultSubject ||
		cc.AckPolicy != jetstream.AckExplicitPolicy || cc.AckWait != stream.DefaultAckWait ||
		cc.MaxDeliver != stream.DefaultMaxDeliver || cc.MaxAckPending != stream.DefaultMaxAckPending ||
		cc.DeliverPolicy != jetstream.DeliverAllPolicy || len(cc.BackOff) != 0 || cc.DeliverSubject != "" {
		t.Errorf("nats/consumer.json: %+v: want pull durable %s on %s, explicit acks, AckWait %s, MaxDeliver %d, MaxAckPending %d, no BackOff",
			cc, stream.DefaultDurable, stream.DefaultSubject, stream.DefaultAckWait, stream.DefaultMaxDeliver, stream.DefaultMaxAckPending)
	}
	if cc.MaxDeliver != -1 {
		t.Errorf("nats/consumer.json: max_deliver %d: want -1 (a transient failure is retried, never dead-lettered)", cc.MaxDeliver)
	}
	var dc jetstream.StreamConfig
	decodeStrict(t, "nats/deadletter.json", &dc)
	if dc.Name != stream.DefaultStream+stream.DeadLetterStreamSuffix || !slices.Equal(dc.Subjects, []string{stream.DefaultDeadLetter}) ||
		dc.Storage != jetstream.FileStorage || dc.Retention != jetstream.LimitsPolicy || dc.MaxAge != 0 || dc.MaxMsgs > 0 || dc.MaxBytes > 0 {
		t.Errorf("nats/deadletter.json: %+v: want stream %s%s, subjects [%s], file storage, limits retention, no limits (dead letters are kept until re-driven)",
			dc, stream.DefaultStream, stream.DeadLetterStreamSuffix, stream.DefaultDeadLetter)
	}
	for _, sub := range dc.Subjects {
		if sub == stream.DefaultSubject || strings.HasPrefix(sub, strings.TrimSuffix(stream.DefaultSubject, ">")) {
			t.Errorf("nats/deadletter.json captures %s, a subject of the source stream: dead letters would be consumed again", sub)
		}
	}
	if configVar(t, "PAYSYNC_NATS_DEAD_LETTER").def != stream.DefaultDeadLetter {
		t.Errorf("PAYSYNC_NATS_DEAD_LETTER default %s differs from stream.DefaultDeadLetter %s", configVar(t, "PAYSYNC_NATS_DEAD_LETTER").def, stream.DefaultDeadLetter)
	}
	if configVar(t, "PAYSYNC_NATS_ACK_WAIT").def != stream.DefaultAckWait.String() {
		t.Errorf("PAYSYNC_NATS_ACK_WAIT default %s differs from stream.DefaultAckWait %s", configVar(t, "PAYSYNC_NATS_ACK_WAIT").def, stream.DefaultAckWait)
	}
}

// TestNATSFilesOnServer creates the stream, the consumer and the
// dead-letter stream from the JSON files on an embedded nats-server, sending
// the files' bytes as they are (what `nats stream add --config` and `nats
// consumer add --config` send), and compares them with what paysync creates
// itself on another server. Then paysync, bound to them
// (PAYSYNC_NATS_BIND=true), consumes a message.
func TestNATSFilesOnServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// What paysync creates.
	nsA := natstest.Start(t)
	srcA, err := stream.New(stream.Config{URL: nsA.ClientURL()}, sink(make(chan stream.Message, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if err := srcA.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srcA.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wantS, wantC := infos(ctx, t, nsA)
	wantD := streamConfig(ctx, t, nsA, stream.DefaultStream+stream.DeadLetterStreamSuffix)

	// What the files create.
	nsB := natstest.Start(t)
	nc, err := nats.Connect(nsB.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	apiCall(t, nc, "$JS.API.STREAM.CREATE."+stream.DefaultStream, read(t, "nats/stream.json"))
	body := fmt.Sprintf(`{"stream_name":%q,"config":%s}`, stream.DefaultStream, read(t, "nats/consumer.json"))
	apiCall(t, nc, "$JS.API.CONSUMER.CREATE."+stream.DefaultStream+"."+stream.DefaultDurable, []byte(body))
	apiCall(t, nc, "$JS.API.STREAM.CREATE."+stream.DefaultStream+stream.DeadLetterStreamSuffix, read(t, "nats/deadletter.json"))
	gotS, gotC := infos(ctx, t, nsB)
	if gotD := streamConfig(ctx, t, nsB, stream.DefaultStream+stream.DeadLetterStreamSuffix); !reflect.DeepEqual(gotD, wantD) {
		t.Errorf("nats/deadletter.json creates\n%+v\npaysync creates\n%+v", gotD, wantD)
	}

	if !reflect.DeepEqual(gotS, wantS) {
		t.Errorf("nats/stream.json creates\n%+v\npaysync creates\n%+v", gotS, wantS)
	}
	if !reflect.DeepEqual(gotC, wantC) {
		t.Errorf("nats/consumer.json creates\n%+v\npaysync creates\n%+v", gotC, wantC)
	}

	// paysync binds to them and consumes.
	got := make(chan stream.Message, 1)
	src, err := stream.New(stream.Config{URL: nsB.ClientURL(), Bind: true}, sink(got))
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Start(ctx); err != nil {
		t.Fatalf("paysync cannot bind to the stream and consumer of deploy/nats: %v", err)
	}
	defer src.Close(ctx)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "timesheets.MV8x.test", []byte(`{"id":"t-1"}`), jetstream.WithMsgID("t-1")); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		if m.MsgID != "t-1" || m.Subject != "timesheets.MV8x.test" {
			t.Errorf("consumed %+v", m)
		}
	case <-ctx.Done():
		t.Fatal("paysync consumed nothing through the consumer of deploy/nats")
	}
	// Acked: the work queue is empty.
	for {
		st, err := js.Stream(ctx, stream.DefaultStream)
		if err == nil && st.CachedInfo().State.Msgs == 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the message was not acked")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

type sink chan stream.Message

func (s sink) Commit(_ context.Context, m stream.Message) (stream.Outcome, error) {
	select {
	case s <- m:
	default:
	}
	return stream.Committed, nil
}

// apiCall sends a JetStream API request and fails on an error answer.
func apiCall(t *testing.T, nc *nats.Conn, subject string, body []byte) {
	t.Helper()
	msg, err := nc.Request(subject, body, 5*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	var resp struct {
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		t.Fatalf("%s: %v: %s", subject, err, msg.Data)
	}
	if resp.Error != nil {
		t.Fatalf("%s: the server refuses the file: %d %s", subject, resp.Error.ErrCode, resp.Error.Description)
	}
}

// infos returns the server's configuration of the default stream and
// consumer, without the metadata the server adds (versions).
func infos(ctx context.Context, t *testing.T, ns *server.Server) (jetstream.StreamConfig, jetstream.ConsumerConfig) {
	t.Helper()
	_, js := natstest.Connect(t, ns.ClientURL())
	s, err := js.Stream(ctx, stream.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Consumer(ctx, stream.DefaultDurable)
	if err != nil {
		t.Fatal(err)
	}
	sc, cc := s.CachedInfo().Config, c.CachedInfo().Config
	sc.Metadata, cc.Metadata = dropServerMeta(sc.Metadata), dropServerMeta(cc.Metadata)
	return sc, cc
}

// streamConfig returns the server's configuration of a stream, without
// the metadata the server adds.
func streamConfig(ctx context.Context, t *testing.T, ns *server.Server, name string) jetstream.StreamConfig {
	t.Helper()
	_, js := natstest.Connect(t, ns.ClientURL())
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatalf("stream %s: %v", name, err)
	}
	sc := s.CachedInfo().Config
	sc.Metadata = dropServerMeta(sc.Metadata)
	return sc
}

func dropServerMeta(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if !strings.HasPrefix(k, "_nats.") {
			out[k] = v
		}
	}
	return out
}
