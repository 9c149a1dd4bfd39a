package main

// The legacy ledger fixture (testdata/legacy-313bf20, written by
// TestGenerateLegacyFixture in legacy_fixture_gen_test.go under the build
// tag legacyfixture): its loader, for tests of a later paysync that opens
// a ledger written by 313bf20, and a check that the fixture is what this
// commit's paysync made of it.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll/sandbox"
)

const legacyFixtureDir = "testdata/legacy-313bf20"

// legacyPayroll is payroll.json: the sandbox's state when the fixture was
// made, and what the ledger believed payroll held.
type legacyPayroll struct {
	Commit         string          `json:"paysync_commit"`
	SandboxOptions string          `json:"sandbox_options"`
	NextSeq        int             `json:"next_pay_part_seq"` // the sandbox's next pay part is pp_<NextSeq>
	Companies      []legacyCompany `json:"companies"`         // in the sandbox's fixture order
	Foreign        []string        `json:"foreign_pay_part_ids"`
	// LiveGroups sums the units of the ledger's live pay parts per
	// company|employee|code|rate|month (rate "-" for none).
	LiveGroups map[string]string `json:"live_groups"`
	LedgerLive []legacyLivePart  `json:"ledger_live_pay_parts"`
}

type legacyCompany struct {
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	PayParts []legacyPayPart `json:"pay_parts"` // creation order
}

type legacyPayPart struct {
	ID  string `json:"id"`
	Seq int    `json:"seq"` // the N of the id (base64 of "pp_N")
	paysync.PayPartInput
	Foreign bool `json:"foreign,omitempty"` // typed in by hand, not paysync's
}

// legacyLivePart is a pay part the ledger counts live (created, not
// superseded, not of a reverted or split batch).
type legacyLivePart struct {
	LedgerID  int64  `json:"ledger_id"`
	BatchID   int64  `json:"batch_id"`
	PayrollID string `json:"payroll_id"`
	Company   string `json:"company_id"`
	Employee  string `json:"employee_id"`
	Code      string `json:"code"`
	Units     string `json:"units,omitempty"`
	Rate      string `json:"rate,omitempty"`
	Amount    string `json:"amount,omitempty"`
	Month     string `json:"month"`
	State     string `json:"state"`
}

func legacyGroupKey(company, employee, code, rate, month string) string {
	if rate == "" {
		rate = "-"
	}
	return strings.Join([]string{company, employee, code, rate, month}, "|")
}

// legacyPayPartSeq returns N of a sandbox pay part id, base64 of "pp_N".
func legacyPayPartSeq(id string) (int, error) {
	b, err := base64.StdEncoding.DecodeString(id)
	if err != nil || !strings.HasPrefix(string(b), "pp_") {
		return 0, fmt.Errorf("pay part id %q is not base64 of pp_N", id)
	}
	return strconv.Atoi(string(b[3:]))
}

func legacySandboxID(seq int) string {
	return base64.StdEncoding.EncodeToString([]byte("pp_" + strconv.Itoa(seq)))
}

// loadLegacyPayroll reads testdata/legacy-313bf20/payroll.json.
func loadLegacyPayroll(t *testing.T) legacyPayroll {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(legacyFixtureDir, "payroll.json"))
	if err != nil {
		t.Fatal(err)
	}
	var lp legacyPayroll
	if err := json.Unmarshal(b, &lp); err != nil {
		t.Fatalf("payroll.json: %v", err)
	}
	if lp.NextSeq < 1 || len(lp.Companies) == 0 {
		t.Fatalf("payroll.json: next_pay_part_seq %d, %d companies", lp.NextSeq, len(lp.Companies))
	}
	return lp
}

// seedLegacyPayroll makes a fresh sandbox (sandbox.Options{}, no pay part
// created yet) hold exactly lp's pay parts, with their ids, in their
// order: the sandbox numbers pay parts from one global sequence, so it
// seeds seq 1..NextSeq-1 in order, each pay part lp holds into its
// company and, for a seq that is gone, a throw-away pay part deleted at
// once. The sandbox's next pay part is then pp_<NextSeq>.
func seedLegacyPayroll(t *testing.T, sb *sandbox.Server, lp legacyPayroll) {
	t.Helper()
	if n := sb.PayPartCount(); n != 0 {
		t.Fatalf("seed the legacy payroll: the sandbox holds %d pay parts already", n)
	}
	type at struct {
		company string
		p       legacyPayPart
	}
	bySeq := map[int]at{}
	for _, c := range lp.Companies {
		for _, p := range c.PayParts {
			n, err := legacyPayPartSeq(p.ID)
			if err != nil || n != p.Seq || n >= lp.NextSeq {
				t.Fatalf("payroll.json: pay part %s: seq %d, next %d (%v)", p.ID, p.Seq, lp.NextSeq, err)
			}
			if _, dup := bySeq[n]; dup {
				t.Fatalf("payroll.json: pay part %s twice", p.ID)
			}
			bySeq[n] = at{c.ID, p}
		}
	}
	for n := 1; n < lp.NextSeq; n++ {
		want := legacySandboxID(n)
		a, keep := bySeq[n]
		company, in := sandbox.CompanyNordlys, paysync.PayPartInput{EmployeeID: sandbox.EmpMetteHansen, Code: "T1", Numbers: paysync.Numbers{Units: paysync.Dec("1")}}
		if keep {
			company, in = a.company, a.p.PayPartInput
		}
		got, err := sb.SeedPayPart(company, in)
		if err != nil {
			t.Fatalf("seed pay part %s: %v", want, err)
		}
		if got.ID != want {
			t.Fatalf("seed pay part seq %d: the sandbox gave it id %s, want %s (was the sandbox fresh?)", n, got.ID, want)
		}
		if !keep {
			if err := sb.DeletePayPartDirect(company, got.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The sandbox holds lp, company by company, in order.
	st := sb.State()
	for _, c := range lp.Companies {
		i := slices.IndexFunc(st.Companies, func(s sandbox.CompanyState) bool { return s.ID == c.ID })
		if i < 0 {
			t.Fatalf("payroll.json: company %s is not in the sandbox", c.ID)
		}
		got := st.Companies[i].PayParts
		if len(got) != len(c.PayParts) {
			t.Fatalf("company %s: seeded %d pay parts, want %d", c.ID, len(got), len(c.PayParts))
		}
		for j, p := range c.PayParts {
			if got[j].ID != p.ID || !got[j].Matches(p.PayPartInput) {
				t.Fatalf("company %s: pay part %d is %+v, want %+v", c.ID, j, got[j], p)
			}
		}
	}
}

// copyLegacyLedger copies the fixture's ledger.db into a new temporary
// directory with mode 0600 (the ledger refuses a file others can read, and
// git checks it out 0644) and returns its path. Open only the copy: the
// ledger migrates the file it opens.
func copyLegacyLedger(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(legacyFixtureDir, "ledger.db"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "ledger.db")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
