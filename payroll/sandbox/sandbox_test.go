package sandbox

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
)

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

func TestServer_StartClose(t *testing.T) {
	s := New(Options{})
	base, err := s.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(base, "http://127.0.0.1:") || s.URL() != base {
		t.Fatalf("Start = %q, URL = %q", base, s.URL())
	}
	if _, err := s.Start("127.0.0.1:0"); err == nil {
		t.Error("second Start succeeded")
	}
	e := &testEnv{t: t, s: s, base: base, hc: &http.Client{Timeout: 5 * time.Second}}
	if r := e.gql(e.accessToken(), `{ current_company { id } }`, nil); len(r.Errors) > 0 {
		t.Fatal(r.Errors)
	}
	ctx, cancel := contextWithTimeout(5 * time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := http.Post(base+"/graphql", "application/json", nil); err == nil {
		t.Error("server still answers after Close")
	}
}

func TestServer_Options(t *testing.T) {
	o := New(Options{Faults: []Fault{{Kind: FaultLatency}}}).Options()
	if o.Realm != "danlon-sandbox" || o.ClientID != "paysync-sandbox" || o.ClientSecret != "sandbox-secret" ||
		o.Username != "demo" || o.Password != "demo" || o.AccessTTL != 5*time.Minute || o.IntScale != 2 ||
		o.InputTypeName != "PayPartInput" || o.Now == nil || len(o.Faults) != 1 {
		t.Fatalf("defaults = %+v", o)
	}
	for _, bad := range []Options{
		{Numbers: 7}, {Allowed: 3}, {InputTypeName: "PayPart"}, {InputTypeName: "Pay Part"},
		{InputTypeName: "__X"}, {Faults: []Fault{{Kind: "nope"}}}, {Username: "other"},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%+v) did not panic", bad)
				}
			}()
			New(bad)
		}()
	}
}

func TestServer_CustomUser(t *testing.T) {
	e := newEnv(t, Options{Username: "anna", Password: "pw", Realm: "test"})
	tok := e.login("anna", "pw")["access_token"].(string)
	var d struct {
		Companies []struct{ ID string } `json:"companies"`
	}
	e.mustData(tok, `{ companies { id } }`, nil, &d)
	if len(d.Companies) != 2 || e.s.State().Companies[0].Owner != "anna" {
		t.Fatalf("anna sees %+v", d)
	}
	if status, _ := e.postForm(e.tokenURL(), e.clientForm(url.Values{"grant_type": {"password"}, "username": {"demo"}, "password": {"demo"}}), "", ""); status != 401 {
		t.Errorf("demo still logs in: %d", status)
	}
}

func TestFixture(t *testing.T) {
	enc := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	ids := map[string]string{
		CompanyNordlys: "1_1", CompanyFjordtech: "1_2", CompanyHavblik: "1_3",
		EmpMetteHansen: "1_1_1", EmpLarsNielsen: "1_1_2", EmpSofieJensen: "1_1_3", EmpAndersPedersen: "1_1_4",
		EmpJonasLarsen: "1_2_1", EmpEmmaChristensen: "1_2_2", EmpPeterMadsen1: "1_2_3", EmpPeterMadsen2: "1_2_4",
		EmpIdaPoulsen: "1_3_1",
	}
	for id, raw := range ids {
		if enc(raw) != id {
			t.Errorf("%s: constant %s, want %s", raw, id, enc(raw))
		}
	}
	st := New(Options{}).State()
	if len(st.Companies) != 3 || st.Companies[0].Name != "Nordlys ApS" || st.Companies[1].Name != "Fjordtech A/S" ||
		st.Companies[2].Name != "Havblik I/S" || st.Companies[2].Owner != "other" || st.Companies[0].Owner != "demo" {
		t.Fatalf("companies = %+v", st.Companies)
	}
	if e := st.Companies[1].Employees; e[2].Name != e[3].Name || e[2].ID == e[3].ID {
		t.Errorf("want two different Peter Madsens: %+v", e)
	}
	var codes []string
	for _, m := range FixtureMeta() {
		codes = append(codes, m.Code)
		if m.Units == paysync.RuleUnknown || m.Rate == paysync.RuleUnknown || m.Amount == paysync.RuleUnknown {
			t.Errorf("%s has an unknown rule", m.Code)
		}
	}
	if got := strings.Join(codes, " "); got != "T1 T2 T3 TILLAEG KM BONUS FERIE DIAET SYG" {
		t.Errorf("codes = %s", got)
	}
	if m := FixtureMeta()[3]; m.Code != "TILLAEG" || m.Units != paysync.RuleOptional || m.Amount != paysync.RuleMandatory {
		t.Errorf("TILLAEG = %+v", m)
	}
}
