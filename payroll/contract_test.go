package payroll_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
)

var update = flag.Bool("update", false, "rewrite golden files")

// variant is one of the four sandbox schema variants.
type variant struct {
	name    string
	numbers sandbox.NumberType
	allowed sandbox.AllowedType
}

var variants = []variant{
	{"float-boolean", sandbox.NumbersFloat, sandbox.AllowedBoolean},
	{"float-enum", sandbox.NumbersFloat, sandbox.AllowedEnum},
	{"int-boolean", sandbox.NumbersInt, sandbox.AllowedBoolean},
	{"int-enum", sandbox.NumbersInt, sandbox.AllowedEnum},
}

// recorder keeps the bodies of GraphQL requests that reach the sandbox.
type recorder struct {
	mu      sync.Mutex
	bodies  map[string][]byte // by operationName, the last one
	headers http.Header       // of the last GraphQL request
}

func (r *recorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path == "/graphql" {
			b, _ := io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(b))
			var p struct {
				OperationName string `json:"operationName"`
			}
			_ = json.Unmarshal(b, &p)
			r.mu.Lock()
			r.bodies[p.OperationName] = b
			r.headers = req.Header.Clone()
			r.mu.Unlock()
		}
		h.ServeHTTP(w, req)
	})
}

type env struct {
	sb   *sandbox.Server
	url  string
	rec  *recorder
	opts sandbox.Options
}

// startSandbox serves a sandbox over real loopback HTTP.
func startSandbox(t *testing.T, opts sandbox.Options) *env {
	t.Helper()
	sb := sandbox.New(opts)
	rec := &recorder{bodies: map[string][]byte{}}
	srv := httptest.NewServer(rec.wrap(sb.Handler()))
	t.Cleanup(srv.Close)
	return &env{sb: sb, url: srv.URL, rec: rec, opts: sb.Options()}
}

func (e *env) config(t *testing.T) payroll.Config {
	t.Helper()
	return payroll.Config{
		URL: e.url, AuthURL: e.url, Realm: e.opts.Realm,
		ClientID: e.opts.ClientID, ClientSecret: e.opts.ClientSecret,
		RefreshToken: e.sb.IssueRefreshToken(),
		Store:        &payroll.FileStore{Path: filepath.Join(t.TempDir(), "token.json")},
		Timeout:      5 * time.Second,
	}
}

func (e *env) client(t *testing.T) *payroll.Client {
	t.Helper()
	c, err := payroll.New(e.config(t))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func item(emp, code, units, rate, amount string) paysync.PayPartInput {
	in := paysync.PayPartInput{EmployeeID: emp, Code: code}
	for f, v := range map[paysync.Field]string{paysync.FieldUnits: units, paysync.FieldRate: rate, paysync.FieldAmount: amount} {
		if v != "" {
			in.Set(f, paysync.Dec(v))
		}
	}
	return in
}

// dialects are the sandbox's two dialects; golden files of the camelCase
// one are in testdata/golden/camel-<variant>.
var dialects = []struct {
	name, prefix string
	sandbox      sandbox.Dialect
	want         payroll.Dialect
}{
	{"snake", "", sandbox.SnakeCase, payroll.Snake},
	{"camel", "camel-", sandbox.CamelCase, payroll.Camel},
}

// TestContract runs every operation against every sandbox variant, in
// both dialects, over real HTTP, and compares the GraphQL requests with
// golden files.
func TestContract(t *testing.T) {
	for _, d := range dialects {
		for _, v := range variants {
			t.Run(d.prefix+v.name, func(t *testing.T) { contract(t, d.prefix+v.name, d.sandbox, d.want, v) })
		}
	}
}

// contract is TestContract for one dialect and variant; golden names its
// golden directory.
func contract(t *testing.T, golden string, dialect sandbox.Dialect, wantDialect payroll.Dialect, v variant) {
	e := startSandbox(t, sandbox.Options{Dialect: dialect, Numbers: v.numbers, Allowed: v.allowed, Rotate: true})
	c := e.client(t)
	ctx := ctxT(t)

	s, err := c.Schema(ctx)
	if err != nil {
		t.Fatalf("Schema: %v", err)
	}
	if s.Dialect != wantDialect || s.Names.Delete == "" {
		t.Errorf("probe: dialect %s, delete %q; want %s with a delete", s.Dialect, s.Names.Delete, wantDialect)
	}
	wantKind := payroll.Float
	if v.numbers == sandbox.NumbersInt {
		wantKind = payroll.Int
	}
	for _, f := range paysync.Fields {
		if s.In[f].Kind != wantKind || s.Out[f].Kind != wantKind {
			t.Errorf("probe: %s in=%s out=%s, want %s", f, s.In[f], s.Out[f], wantKind)
		}
	}
	wantAllowed := payroll.AllowedBoolean
	if v.allowed == sandbox.AllowedEnum {
		wantAllowed = payroll.AllowedEnum
	}
	if s.Allowed != wantAllowed {
		t.Errorf("probe: allowed %s, want %s", s.Allowed, wantAllowed)
	}

	// pay_parts_meta: tri-state from enums, allowed/forbidden from Booleans.
	meta, err := c.PayPartsMeta(ctx)
	if err != nil {
		t.Fatalf("PayPartsMeta: %v", err)
	}
	want := sandbox.FixtureMeta()
	if len(meta) != len(want) {
		t.Fatalf("meta: %d codes, want %d", len(meta), len(want))
	}
	for i, m := range meta {
		w := want[i]
		if v.allowed == sandbox.AllowedBoolean {
			for _, f := range paysync.Fields {
				w2 := paysync.FieldRuleFromBool(w.Rule(f).Allowed())
				switch f {
				case paysync.FieldUnits:
					w.Units = w2
				case paysync.FieldRate:
					w.Rate = w2
				case paysync.FieldAmount:
					w.Amount = w2
				}
			}
		}
		if m != w {
			t.Errorf("meta[%d] = %+v, want %+v", i, m, w)
		}
	}

	cur, err := c.CurrentCompany(ctx)
	if err != nil || cur != sandbox.CompanyNordlys {
		t.Fatalf("CurrentCompany = %q, %v", cur, err)
	}

	all, err := c.Companies(ctx, nil)
	if err != nil {
		t.Fatalf("Companies: %v", err)
	}
	if got := companyIDs(all); got != sandbox.CompanyNordlys+","+sandbox.CompanyFjordtech {
		t.Errorf("Companies(all) = %s", got)
	}
	one, err := c.Companies(ctx, []string{sandbox.CompanyFjordtech, sandbox.CompanyHavblik})
	if err != nil || companyIDs(one) != sandbox.CompanyFjordtech {
		t.Errorf("Companies(Fjordtech, Havblik) = %s, %v (Havblik belongs to another user)", companyIDs(one), err)
	}

	emps, err := c.Employees(ctx, sandbox.CompanyNordlys, nil)
	if err != nil || len(emps) != 4 {
		t.Fatalf("Employees = %d, %v", len(emps), err)
	}
	emps, err = c.Employees(ctx, sandbox.CompanyNordlys, []string{sandbox.EmpLarsNielsen})
	if err != nil || len(emps) != 1 || emps[0].Name != "Lars Nielsen" || emps[0].Number != "11" || emps[0].Email != "lars.nielsen@nordlys.dk" {
		t.Fatalf("Employees(Lars) = %+v, %v", emps, err)
	}

	items := []paysync.PayPartInput{
		item(sandbox.EmpMetteHansen, "T1", "7.5", "215.50", ""),
		item(sandbox.EmpLarsNielsen, "BONUS", "", "", "1500.25"),
		item(sandbox.EmpMetteHansen, "TILLAEG", "3", "", "45.75"),
		item(sandbox.EmpSofieJensen, "KM", "112.4", "", ""),
	}
	created, err := c.CreatePayParts(ctx, sandbox.CompanyNordlys, items)
	if err != nil {
		t.Fatalf("CreatePayParts: %v", err)
	}
	if len(created) != len(items) {
		t.Fatalf("created %d, want %d", len(created), len(items))
	}
	for i, p := range created {
		if p.ID == "" || !p.Matches(items[i]) {
			t.Errorf("created[%d] = %+v, want %+v", i, p, items[i])
		}
	}
	// The sandbox holds exactly these, with exact numbers.
	st := e.sb.State()
	if got := stateParts(st, sandbox.CompanyNordlys); len(got) != len(items) {
		t.Fatalf("sandbox holds %d pay parts, want %d", len(got), len(items))
	} else {
		for i, p := range got {
			if p.ID != created[i].ID || !p.Matches(items[i]) {
				t.Errorf("sandbox pay part %d = %+v, want %+v", i, p, items[i])
			}
		}
	}

	// The three ways to read pay parts agree.
	top, err := c.PayParts(ctx, sandbox.CompanyNordlys)
	if err != nil {
		t.Fatalf("PayParts: %v", err)
	}
	viaCompany, err := c.CompanyPayParts(ctx, sandbox.CompanyNordlys)
	if err != nil {
		t.Fatalf("CompanyPayParts: %v", err)
	}
	viaEmployees, err := c.EmployeePayParts(ctx, sandbox.CompanyNordlys, nil)
	if err != nil {
		t.Fatalf("EmployeePayParts: %v", err)
	}
	var flat []paysync.PayPart
	for _, e := range viaEmployees {
		flat = append(flat, e.PayParts...)
	}
	for name, got := range map[string][]paysync.PayPart{"pay_parts": top, "companies{pay_parts}": viaCompany, "employees{pay_parts}": flat} {
		if !samePayParts(got, created) {
			t.Errorf("%s = %+v, want %+v", name, got, created)
		}
	}
	mette, err := c.EmployeePayParts(ctx, sandbox.CompanyNordlys, []string{sandbox.EmpMetteHansen})
	if err != nil || len(mette) != 1 || len(mette[0].PayParts) != 2 {
		t.Errorf("EmployeePayParts(Mette) = %+v, %v", mette, err)
	}

	ids := []string{created[0].ID, created[1].ID, created[2].ID, created[3].ID}
	if _, err := c.DeletePayParts(ctx, sandbox.CompanyNordlys, ids); err != nil {
		t.Fatalf("DeletePayParts: %v", err)
	}
	if left := stateParts(e.sb.State(), sandbox.CompanyNordlys); len(left) != 0 {
		t.Fatalf("after delete the sandbox holds %d pay parts", len(left))
	}

	ops := []string{"SchemaProbe", "PayPartsMeta", "CurrentCompany", "Companies", "CompanyEmployees",
		"CreatePayParts", "PayParts", "CompanyPayParts", "EmployeePayParts", "DeletePayParts"}
	if s.Names.TopPayParts == "" {
		ops = slices.DeleteFunc(ops, func(op string) bool { return op == "PayParts" }) // read through CompanyPayParts
	}
	checkGolden(t, golden, e.rec, ops)
	e.rec.mu.Lock()
	h := e.rec.headers
	e.rec.mu.Unlock()
	if !strings.HasPrefix(h.Get("User-Agent"), "paysync/") || !strings.Contains(h.Get("Accept-Encoding"), "gzip") ||
		h.Get("Accept") != "application/json" || h.Get("Content-Type") != "application/json" {
		t.Errorf("request headers: User-Agent %q, Accept-Encoding %q, Accept %q, Content-Type %q",
			h.Get("User-Agent"), h.Get("Accept-Encoding"), h.Get("Accept"), h.Get("Content-Type"))
	}
}

func companyIDs(cs []paysync.Company) string {
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.ID)
	}
	return strings.Join(ids, ",")
}

func stateParts(st sandbox.State, company string) []paysync.PayPart {
	for _, c := range st.Companies {
		if c.ID == company {
			return c.PayParts
		}
	}
	return nil
}

func samePayParts(a, b []paysync.PayPart) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(p paysync.PayPart) string {
		return p.ID + "|" + p.EmployeeID + "|" + p.Code + "|" + p.Numbers.String()
	}
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		ka[i], kb[i] = key(a[i]), key(b[i])
	}
	sort.Strings(ka)
	sort.Strings(kb)
	return strings.Join(ka, "\n") == strings.Join(kb, "\n")
}

// checkGolden compares every recorded request body (indented JSON) with
// testdata/golden/<variant>/<operation>.json.
func checkGolden(t *testing.T, variant string, rec *recorder, ops []string) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	dir := filepath.Join("testdata", "golden", variant)
	for _, op := range ops {
		body, ok := rec.bodies[op]
		if !ok {
			t.Errorf("no %s request was sent", op)
			continue
		}
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, body, "", "  "); err != nil {
			t.Fatalf("%s: body is not JSON: %v", op, err)
		}
		path := filepath.Join(dir, op+".json")
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, pretty.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("golden %s: %v (run with -update)", path, err)
		}
		if !bytes.Equal(pretty.Bytes(), want) {
			t.Errorf("%s request differs from %s:\n got: %s\nwant: %s", op, path, pretty.Bytes(), want)
		}
	}
}

// TestContract_OverridesWithoutIntrospection uses explicit schema settings
// and never sends an introspection query.
func TestContract_OverridesWithoutIntrospection(t *testing.T) {
	e := startSandbox(t, sandbox.Options{Numbers: sandbox.NumbersInt, Allowed: sandbox.AllowedEnum, InputTypeName: "NewPayPart"})
	cfg := e.config(t)
	cfg.Schema = payroll.SchemaOverrides{NoProbe: true, Numbers: payroll.Int, InputType: "NewPayPart"}
	c, err := payroll.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	created, err := c.CreatePayParts(ctx, sandbox.CompanyNordlys, []paysync.PayPartInput{item(sandbox.EmpMetteHansen, "T2", "2.25", "310.40", "")})
	if err != nil {
		t.Fatalf("CreatePayParts with overrides: %v", err)
	}
	got := stateParts(e.sb.State(), sandbox.CompanyNordlys)
	if len(got) != 1 || got[0].ID != created[0].ID || got[0].Units.Decimal.String() != "2.25" || got[0].Rate.Decimal.String() != "310.4" {
		t.Fatalf("sandbox holds %+v", got)
	}
	if n := e.sb.State().Counters.Requests["__schema"]; n != 0 {
		t.Errorf("%d introspection requests with the probe off", n)
	}
}

// TestContract_ProbeFindsInputTypeName: the variable type comes from the
// server, not from a guess.
func TestContract_ProbeFindsInputTypeName(t *testing.T) {
	e := startSandbox(t, sandbox.Options{InputTypeName: "CreatePayPartInput"})
	c := e.client(t)
	s, err := c.Schema(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if s.InputTypeName != "CreatePayPartInput" || s.PayPartsInputType != "[CreatePayPartInput]" {
		t.Fatalf("probe found %q / %q", s.InputTypeName, s.PayPartsInputType)
	}
	if _, err := c.CreatePayParts(ctxT(t), sandbox.CompanyNordlys, []paysync.PayPartInput{item(sandbox.EmpMetteHansen, "T1", "1", "", "")}); err != nil {
		t.Fatal(err)
	}
}
