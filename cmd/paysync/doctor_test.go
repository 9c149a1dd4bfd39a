package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/paysync/paysync"
	"github.com/paysync/paysync/internal/natstest"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll/sandbox"
)

const doctorExampleRules = "../../deploy/examples/rules.yaml"

// doctorChecks are the lines of a full doctor run (NATS, inbox and rules set).
var doctorChecks = []string{"configuration", "metrics listener", "ledger", "ledger batches", "payroll token", "payroll client", "schema", "company",
	"rules", "rules company", "rules employees", "nats", "nats stream", "nats consumer", "inbox"}

// runDoctorCLI runs 'paysync doctor ARGS' in this process. Until the
// command is registered in app.go it calls runDoctor the way run does.
func runDoctorCLI(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	if _, ok := commands()["doctor"]; ok {
		return runInProcess(t, env, append([]string{"doctor"}, args...)...)
	}
	var out, errb bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	io := stdio{in: strings.NewReader(""), out: &out, err: &errb}
	code := report(runDoctor(context.Background(), args, io, lookup), io.err)
	return result{code, out.String(), errb.String()}
}

// doctorLine returns the line of check name and its symbol (✓ ! ✗ -).
func doctorLine(t *testing.T, out, name string) (sym, line string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		s, rest, ok := strings.Cut(l, " ")
		if ok && strings.HasPrefix(rest, name+":") {
			return s, l
		}
	}
	t.Fatalf("no line for check %q in:\n%s", name, out)
	return "", ""
}

// healthyDoctorEnv is a sandbox, a ledger, the example rules, an embedded
// NATS server and an inbox.
func healthyDoctorEnv(t *testing.T, opts sandbox.Options) (sandboxEnv, map[string]string) {
	t.Helper()
	s := startSandbox(t, opts)
	ns := natstest.Start(t)
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_MAPPING", doctorExampleRules,
		"NATS_URL", ns.ClientURL(), "PAYSYNC_INBOX", t.TempDir(), "PAYSYNC_LOG_LEVEL", "error")
	delete(env, "PAYSYNC_TOKEN_FILE") // the rotated token lives in the ledger
	return s, env
}

// doctorCreateStream makes the stream and consumer paysync run would, and
// publishes n messages.
func doctorCreateStream(t *testing.T, url string, n int) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TIMESHEETS", Subjects: []string{"timesheets.>"},
		Storage: jetstream.FileStorage, Retention: jetstream.WorkQueuePolicy, Duplicates: 2 * time.Minute}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctx, "TIMESHEETS", jetstream.ConsumerConfig{Durable: "paysync", FilterSubject: "timesheets.>",
		AckPolicy: jetstream.AckExplicitPolicy, AckWait: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := js.Publish(ctx, "timesheets.MV8x.test", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDoctor_Healthy(t *testing.T) {
	_, env := healthyDoctorEnv(t, sandbox.Options{Rotate: true})
	secrets := []string{env["PAYSYNC_CLIENT_SECRET"], env["PAYSYNC_REFRESH_TOKEN"]}

	// First run: a fresh ledger and no stream yet are notes, not problems.
	r := runDoctorCLI(t, env)
	t.Logf("first run:\n%s", r.stdout)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, name := range doctorChecks {
		if sym, line := doctorLine(t, r.stdout, name); sym != "✓" && sym != "!" {
			t.Errorf("not ✓ or !: %s", line)
		}
	}
	if lines := strings.Count(r.stdout, "\n"); lines != len(doctorChecks) {
		t.Errorf("%d lines, want one per check (%d)", lines, len(doctorChecks))
	}
	for name, want := range map[string]string{"ledger": "created now", "nats stream": "paysync run will create it", "payroll token": "refreshed and rotated: fingerprint",
		"payroll client": "granted a refresh with them"} {
		if _, line := doctorLine(t, r.stdout, name); !strings.Contains(line, want) {
			t.Errorf("%s line lacks %q: %s", name, want, line)
		}
	}
	assertClean(t, r, secrets...)

	// Second run, with the stream and consumer in place: all ✓.
	doctorCreateStream(t, env["NATS_URL"], 3)
	r = runDoctorCLI(t, env)
	t.Logf("second run:\n%s", r.stdout)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, name := range doctorChecks {
		if sym, line := doctorLine(t, r.stdout, name); sym != "✓" {
			t.Errorf("not ✓: %s", line)
		}
	}
	for name, want := range map[string]string{
		"schema": "units=Float", "company": "Nordlys ApS (MV8x", "rules": "codes TILLAEG, T2, SYG, KM, T1 all in pay_parts_meta",
		"rules employees": "all employees of Nordlys ApS", "nats consumer": "paysync: 3 pending", "inbox": "writable",
		"payroll token": "stored access token still valid", "payroll client": "the connection's refresh token was not sent",
	} {
		if _, line := doctorLine(t, r.stdout, name); !strings.Contains(line, want) {
			t.Errorf("%s line lacks %q: %s", name, want, line)
		}
	}
	assertClean(t, r, secrets...)

	// --json: the same checks, as a list.
	r = runDoctorCLI(t, env, "--json")
	if r.code != 0 {
		t.Fatalf("--json: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var checks []doctorCheck
	if err := json.Unmarshal([]byte(r.stdout), &checks); err != nil {
		t.Fatalf("--json: %v\n%s", err, r.stdout)
	}
	if len(checks) != len(doctorChecks) {
		t.Fatalf("--json: %d checks, want %d", len(checks), len(doctorChecks))
	}
	for i, c := range checks {
		if c.Name != doctorChecks[i] || !c.OK || c.Warn || c.Detail == "" {
			t.Errorf("--json check %d: %+v", i, c)
		}
	}
	for _, key := range []string{`"name"`, `"ok"`, `"warn"`, `"detail"`, `"fix"`} {
		if !strings.Contains(r.stdout, key) {
			t.Errorf("--json lacks %s", key)
		}
	}
	assertClean(t, r, secrets...)

	// Neither the rotated refresh token nor the access token is printed.
	l, err := ledger.Open(context.Background(), env["PAYSYNC_LEDGER"], ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rt, _, _, err := l.Credentials(context.Background(), credentialName)
	at, _, _, _ := l.AccessToken(context.Background(), credentialName)
	l.Close()
	if err != nil || rt == "" || rt == env["PAYSYNC_REFRESH_TOKEN"] {
		t.Fatalf("stored token: err %v, rotated %v", err, rt != env["PAYSYNC_REFRESH_TOKEN"])
	}
	assertClean(t, r, rt, at)
}

// Warnings do not fail the run: a listener on every interface, pay parts
// waiting to be sent.
func TestDoctor_Warnings(t *testing.T) {
	s := startSandbox(t, sandbox.Options{})
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_HTTP_ADDR", "0.0.0.0:9480", "PAYSYNC_LOG_LEVEL", "error")
	r := runDoctorCLI(t, env)
	if r.code != 0 {
		t.Fatalf("exit %d, want 0\n%s%s", r.code, r.stdout, r.stderr)
	}
	if sym, line := doctorLine(t, r.stdout, "metrics listener"); sym != "!" || !strings.Contains(line, "not on loopback") {
		t.Errorf("want a loopback warning: %s", line)
	}
	// Without NATS_URL, PAYSYNC_INBOX and PAYSYNC_MAPPING those checks are not run.
	for _, name := range []string{"nats", "inbox", "rules"} {
		if strings.Contains(r.stdout, " "+name+":") {
			t.Errorf("check %s ran without its setting:\n%s", name, r.stdout)
		}
	}
	assertClean(t, r, s.env["PAYSYNC_CLIENT_SECRET"], s.env["PAYSYNC_REFRESH_TOKEN"])
}

// doctorWriteRules writes the example rules with the replacements applied, and
// returns the file and the line of the rule named rule.
func doctorWriteRules(t *testing.T, rule string, oldNew ...string) (string, int) {
	t.Helper()
	b, err := os.ReadFile(doctorExampleRules)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	for i := 0; i+1 < len(oldNew); i += 2 {
		if !strings.Contains(text, oldNew[i]) {
			t.Fatalf("example rules lack %q", oldNew[i])
		}
		text = strings.Replace(text, oldNew[i], oldNew[i+1], 1)
	}
	line := 0
	for i, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == "- name: "+rule {
			line = i + 1
		}
	}
	p := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, line
}

func doctorClosedPortURL(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "nats://" + addr
}

// doctorFailBatch imports the toggl sample (so the ledger has batches) and
// marks one failed, as retries exhausted would.
func doctorFailBatch(t *testing.T, env map[string]string) {
	t.Helper()
	r := runInProcess(t, with(env, "PAYSYNC_WIRE_NUMBERS", "auto"), "import", "--rules", doctorExampleRules, "../../deploy/examples/toggl.csv")
	if r.code != 0 {
		t.Fatalf("import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	l, err := ledger.Open(context.Background(), env["PAYSYNC_LEDGER"], ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	bs, err := l.ListBatches(context.Background(), ledger.BatchFilter{})
	if err != nil || len(bs) == 0 {
		t.Fatalf("batches: %v %d", err, len(bs))
	}
	if err := l.SetBatchState(context.Background(), bs[0].ID, paysync.BatchFailed, "payroll: create pay parts: not applied: HTTP 503"); err != nil {
		t.Fatal(err)
	}
}

func TestDoctor_Broken(t *testing.T) {
	type want struct {
		name string   // check
		sym  string   // ✗ or -
		has  []string // in its line
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, s sandboxEnv, env map[string]string) map[string]string
		want  []want
	}{
		{"revoked token", func(t *testing.T, s sandboxEnv, env map[string]string) map[string]string {
			s.sb.RevokeAll()
			return env
		}, []want{
			{"payroll token", "✗", []string{"connection revoked", "fix: re-connect the payroll account", "set PAYSYNC_REFRESH_TOKEN"}},
			{"payroll client", "✓", []string{"accepted by the token endpoint"}}, // checked without the refresh token
			{"schema", "-", []string{"skipped", "revoked"}},
			{"company", "-", []string{"skipped"}},
			{"rules company", "-", []string{"skipped"}},
			{"inbox", "✓", nil}, // the other checks still run
		}},
		{"unknown pay code", func(t *testing.T, s sandboxEnv, env map[string]string) map[string]string {
			p, line := doctorWriteRules(t, "sick", "code: SYG", "code: SICK9")
			env = with(env, "PAYSYNC_MAPPING", p)
			env["want-line"] = fmt.Sprintf("%s:%d: rule \"sick\": code \"SICK9\"", p, line)
			return env
		}, []want{{"rules", "✗", []string{"not in pay_parts_meta", "{want-line}", "fix: use one of the codes"}}}},
		{"unknown employee and invisible company", func(t *testing.T, s sandboxEnv, env map[string]string) map[string]string {
			p, _ := doctorWriteRules(t, "", `"1002": MV8xXzI=`, `"1002": MV8xXzk5`, "company: MV8x", "company: MV8z")
			return with(env, "PAYSYNC_MAPPING", p, "PAYSYNC_COMPANY_ID", sandbox.CompanyNordlys)
		}, []want{
			{"rules company", "✗", []string{"company MV8z is not visible", "MV8x (Nordlys ApS)"}},
			{"rules employees", "✗", []string{"by_number 1002 → MV8xXzk5", "paysync employees --company MV8x"}},
		}},
		{"nats closed port", func(t *testing.T, s sandboxEnv, env map[string]string) map[string]string {
			return with(env, "NATS_URL", doctorClosedPortURL(t))
		}, []want{
			{"nats", "✗", []string{"not connected within 5s", "fix: check NATS_URL"}},
			{"nats stream", "-", []string{"not connected"}},
		}},
		{"nats bind without stream", func(t *testing.T, s sandboxEnv, env map[string]string) map[string]string {
			return with(env, "PAYSYNC_NATS_BIND", "true")
		}, []want{{"nats stream", "✗", []string{"does not exist", "PAYSYNC_NATS_BIND=true", "nats stream add TIMESHEETS"}}}},
		{"inbox is a file", func(t *testing.T, s sandboxEnv, env map[string]string) map[string]string {
			p := filepath.Join(t.TempDir(), "inbox")
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return with(env, "PAYSYNC_INBOX", p)
		}, []want{{"inbox", "✗", []string{"is not a directory (it is a file)", "fix: point PAYSYNC_INBOX at a folder"}}}},
		{"wire numbers int against float", func(t *testing.T, s sandboxEnv, env map[string]string) map[string]string {
			return with(env, "PAYSYNC_WIRE_NUMBERS", "int")
		}, []want{{"schema", "✗", []string{"PAYSYNC_WIRE_NUMBERS=int disagrees", "units is Float", "unset PAYSYNC_WIRE_NUMBERS"}}}},
		{"failed batch", func(t *testing.T, s sandboxEnv, env map[string]string) map[string]string {
			doctorFailBatch(t, env)
			return env
		}, []want{{"ledger batches", "✗", []string{"1 batch failed", "HTTP 503", "paysync batches --state failed", "paysync replay"}}}},
		{"configuration error", func(t *testing.T, s sandboxEnv, env map[string]string) map[string]string {
			return with(env, "PAYSYNC_HTTP_TIMEOUT", "soon", "PAYSYNC_FILE_POLICY", "some")
		}, []want{
			{"configuration", "✗", []string{"PAYSYNC_HTTP_TIMEOUT", `"soon"`, "PAYSYNC_FILE_POLICY", "fix: correct PAYSYNC_HTTP_TIMEOUT, PAYSYNC_FILE_POLICY"}},
			{"payroll token", "-", []string{"PAYSYNC_HTTP_TIMEOUT is invalid"}},
			{"payroll client", "-", []string{"PAYSYNC_HTTP_TIMEOUT is invalid"}},
			{"rules", "!", []string{"pay codes not checked"}},
			{"ledger", "!", nil}, // what can be checked still is
			{"inbox", "✓", nil},
			{"nats", "✓", nil},
		}},
		{"everything at once", func(t *testing.T, s sandboxEnv, env map[string]string) map[string]string {
			doctorFailBatch(t, env)
			p, _ := doctorWriteRules(t, "sick", "code: SYG", "code: SICK9")
			file := filepath.Join(t.TempDir(), "inbox")
			if err := os.WriteFile(file, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return with(env, "PAYSYNC_MAPPING", p, "NATS_URL", doctorClosedPortURL(t), "PAYSYNC_INBOX", file, "PAYSYNC_WIRE_NUMBERS", "int")
		}, []want{
			{"ledger batches", "✗", []string{"1 batch failed"}},
			{"schema", "✗", []string{"PAYSYNC_WIRE_NUMBERS=int disagrees"}},
			{"rules", "✗", []string{`code "SICK9"`}},
			{"nats", "✗", []string{"not connected"}},
			{"inbox", "✗", []string{"not a directory"}},
			{"payroll token", "✓", nil},
			{"company", "✓", nil},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, env := healthyDoctorEnv(t, sandbox.Options{Rotate: true})
			env = tt.setup(t, s, env)
			wantLine := env["want-line"]
			delete(env, "want-line")
			r := runDoctorCLI(t, env)
			t.Logf("%s:\n%s%s", tt.name, r.stdout, r.stderr)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1", r.code)
			}
			problems := 0
			for _, l := range strings.Split(r.stdout, "\n") {
				if strings.HasPrefix(l, "✗ ") {
					problems++
				}
			}
			if !strings.Contains(r.stderr, "doctor: "+plural(problems, "problem", "problems")) {
				t.Errorf("stderr lacks the count of %d problems: %q", problems, r.stderr)
			}
			for _, w := range tt.want {
				sym, line := doctorLine(t, r.stdout, w.name)
				if sym != w.sym {
					t.Errorf("%s: got %s, want %s: %s", w.name, sym, w.sym, line)
				}
				for _, h := range w.has {
					if h == "{want-line}" {
						h = wantLine
					}
					if !strings.Contains(line, h) {
						t.Errorf("%s line lacks %q: %s", w.name, h, line)
					}
				}
			}
			// Every check ran or says why not, one line each.
			for _, name := range doctorChecks {
				doctorLine(t, r.stdout, name)
			}
			assertClean(t, r, s.env["PAYSYNC_CLIENT_SECRET"], s.env["PAYSYNC_REFRESH_TOKEN"])

			// --json tells the same.
			rj := runDoctorCLI(t, env, "--json")
			var checks []doctorCheck
			if err := json.Unmarshal([]byte(rj.stdout), &checks); err != nil || rj.code != 1 {
				t.Fatalf("--json: exit %d, %v\n%s", rj.code, err, rj.stdout)
			}
			failed := 0
			for _, c := range checks {
				if !c.OK && !c.Skipped {
					failed++
					if c.Fix == "" {
						t.Errorf("--json: %s fails without a fix", c.Name)
					}
				}
			}
			if failed != problems {
				t.Errorf("--json: %d failed checks, text %d", failed, problems)
			}
			assertClean(t, rj, s.env["PAYSYNC_CLIENT_SECRET"], s.env["PAYSYNC_REFRESH_TOKEN"])
		})
	}
}

// A wrong client secret is found while the stored access token is still
// valid (no refresh is due), without spending the rotating refresh token:
// the token endpoint is asked with a refresh token that cannot be valid.
func TestDoctor_WrongClientSecretWithValidAccessToken(t *testing.T) {
	s := startSandbox(t, sandbox.Options{Rotate: true})
	env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_LOG_LEVEL", "error")
	delete(env, "PAYSYNC_TOKEN_FILE")
	if r := runDoctorCLI(t, env); r.code != 0 { // refreshes: the ledger holds a rotated token and a fresh access token
		t.Fatalf("first run: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	stored := func() (string, string) {
		l, err := ledger.Open(context.Background(), env["PAYSYNC_LEDGER"], ledger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		rt, _, _, err := l.Credentials(context.Background(), credentialName)
		at, _, _, _ := l.AccessToken(context.Background(), credentialName)
		if err != nil || rt == "" || at == "" {
			t.Fatalf("stored token: %v", err)
		}
		return rt, at
	}
	rt, at := stored()
	grants := s.sb.State().Counters.TokenGrants["refresh_token"]

	const wrong = "not-the-client-secret"
	r := runDoctorCLI(t, with(env, "PAYSYNC_CLIENT_SECRET", wrong))
	t.Logf("wrong secret:\n%s%s", r.stdout, r.stderr)
	if r.code != 1 {
		t.Fatalf("wrong client secret: exit %d, want 1 (a failed check)", r.code)
	}
	if sym, line := doctorLine(t, r.stdout, "payroll client"); sym != "✗" ||
		!strings.Contains(line, "refused client id "+env["PAYSYNC_CLIENT_ID"]) || !strings.Contains(line, "invalid_client") ||
		!strings.Contains(line, "stored access token still works until") || !strings.Contains(line, "fix: set PAYSYNC_CLIENT_ID and PAYSYNC_CLIENT_SECRET") {
		t.Errorf("want a failed client check: %s", line)
	}
	if sym, line := doctorLine(t, r.stdout, "payroll token"); sym != "✓" || !strings.Contains(line, "stored access token still valid") {
		t.Errorf("the stored access token works: %s", line)
	}
	assertClean(t, r, wrong, env["PAYSYNC_CLIENT_SECRET"], env["PAYSYNC_REFRESH_TOKEN"], rt, at)

	// The right secret passes, and neither run spent the refresh token.
	r = runDoctorCLI(t, env)
	if r.code != 0 {
		t.Fatalf("right secret: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if sym, line := doctorLine(t, r.stdout, "payroll client"); sym != "✓" {
		t.Errorf("right secret: %s", line)
	}
	if g := s.sb.State().Counters.TokenGrants["refresh_token"]; g != grants {
		t.Errorf("%d refresh grants during the checks, want none", g-grants)
	}
	if rt2, _ := stored(); rt2 != rt {
		t.Error("the stored refresh token changed")
	}
	assertClean(t, r, env["PAYSYNC_CLIENT_SECRET"], env["PAYSYNC_REFRESH_TOKEN"], rt, at)
}
