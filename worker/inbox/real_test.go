package inbox_test

import (
	"context"
	"database/sql"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
)

// realEnv is a real importer over a ledger in t.TempDir() that delivers to
// the sandbox payroll server over HTTP.
type realEnv struct {
	sb  *sandbox.Server
	led *ledger.Ledger
	im  *worker.InboxSink // the importer as the inbox gets it
}

// newRealEnv builds it; rules nil means the default rules without
// aggregation (one pay part per entry: easy to count).
func newRealEnv(t *testing.T, rules *mapping.Rules, allOrNothing bool) *realEnv {
	t.Helper()
	sb := sandbox.New(sandbox.Options{})
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(srv.Close)
	o := sb.Options()
	cl, err := payroll.New(payroll.Config{URL: srv.URL, Realm: o.Realm, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
		RefreshToken: sb.IssueRefreshToken(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	led, err := ledger.Open(context.Background(), filepath.Join(t.TempDir(), "ledger.db"), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { led.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	schema, err := cl.Schema(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rules == nil {
		rules = mapping.DefaultRules()
		rules.Aggregate = false
	}
	m := mapping.NewMapper(rules, mapping.NewCache(cl), schema, sandbox.CompanyNordlys)
	noSleep := func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	im := &worker.Importer{L: led, D: &worker.Deliverer{L: led, P: cl, Sleep: noSleep, MaxAttempts: 20},
		Mapper: m, Rules: rules, Wire: schema, BatchSize: 10, AllOrNothing: allOrNothing}
	return &realEnv{sb: sb, led: led, im: im.InboxSink()}
}

// payParts is the multiset of pay parts in payroll, as "employee|code|units|amount" → count.
func (e *realEnv) payParts() map[string]int {
	out := map[string]int{}
	for _, c := range e.sb.State().Companies {
		for _, p := range c.PayParts {
			out[partKey(p.EmployeeID, p.Code, p.Numbers)]++
		}
	}
	return out
}

func partKey(emp, code string, n paysync.Numbers) string {
	f := func(d interface{ String() string }, ok bool) string {
		if !ok {
			return "-"
		}
		return d.String()
	}
	return strings.Join([]string{emp, code, f(n.Units.Decimal, n.Units.Valid), f(n.Amount.Decimal, n.Amount.Valid)}, "|")
}

// loadRules reads a rules file.
func loadRules(t *testing.T, path string) *mapping.Rules {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := mapping.LoadRules(path, f)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// entryIDs returns the ids of the entries import recorded (the ledger's
// entries rows of that source), in ledger order, read from the ledger file.
func (e *realEnv) entryIDs(t *testing.T, source int64) []string {
	t.Helper()
	db, err := sql.Open("sqlite", e.led.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), `SELECT entry_id FROM entries WHERE source_id = ? ORDER BY id`, source)
	if err != nil {
		t.Fatalf("entries of import %d: %v", source, err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ids
}
