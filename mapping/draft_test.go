package mapping

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paysync/paysync"
)

// draftEmployees and draftMeta are a payroll company as the sandbox's
// fixture has it, with the true field rules (T2 needs a rate).
var draftEmployees = []paysync.Employee{
	{ID: "E1", Name: "Mette Hansen", Number: "10", Email: "mette.hansen@nordlys.dk"},
	{ID: "E2", Name: "Lars Nielsen", Number: "11", Email: "lars.nielsen@nordlys.dk"},
	{ID: "E4", Name: "Anders Pedersen", Number: "13"},
}

var draftMeta = []paysync.PayPartMeta{
	{Code: "T1", Description: "Timeløn (hourly wage)", Units: paysync.RuleMandatory, Rate: paysync.RuleOptional, Amount: paysync.RuleForbidden},
	{Code: "T2", Description: "Overtid 50%", Units: paysync.RuleMandatory, Rate: paysync.RuleMandatory, Amount: paysync.RuleForbidden},
	{Code: "SYG", Description: "Sygdom (sick hours)", Units: paysync.RuleMandatory, Rate: paysync.RuleOptional, Amount: paysync.RuleForbidden},
}

func draftOf(t *testing.T, name string, data []byte) (string, DraftSummary) {
	t.Helper()
	out, sum, err := Draft([]DraftInput{{Name: name, Data: data}}, DraftOptions{CompanyID: "C1", CompanyName: "Nordlys ApS", Employees: draftEmployees, Meta: draftMeta})
	if err != nil {
		t.Fatal(err)
	}
	return string(out), sum
}

// confirm does what the operator does once the guesses are checked.
func confirm(draft string) string {
	return strings.ReplaceAll(strings.ReplaceAll(draft, "#"+GuessMarker+" ", ""), GuessMarker, "")
}

// TestDraft_UnmatchedAndRate: people payroll does not have are listed
// commented out as unmatched, with the closest payroll names; a code that
// needs a rate the export lacks gets a placeholder that does not load
// until confirmed; the draft is refused until its guesses are confirmed,
// and loads once they are.
func TestDraft_UnmatchedAndRate(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "read", "toggl_basic.csv"))
	if err != nil {
		t.Fatal(err)
	}
	got, sum := draftOf(t, "toggl_basic.csv", data)
	for _, want := range []string{
		`# ann@example.com: PAYROLL_ID   # UNMATCHED Ann Berg, 3 rows, 9.17 h: no payroll number, e-mail or name matches; closest payroll names: `,
		`# bo@example.com: PAYROLL_ID   # UNMATCHED Bo Lund`,
		"tags: overtime", "code: GUESS:T2", "rate: GUESS:RATE", "GUESS: payroll requires a rate for T2",
		"date_format: YYYY-MM-DD", "encoding: auto", "UTF-8 with a byte order mark",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the draft lacks %q:\n%s", want, got)
		}
	}
	if sum.People != 2 || sum.Unmatched != 2 {
		t.Errorf("summary %+v, want 2 people, 2 unmatched", sum)
	}
	if _, err := LoadRules("draft.yaml", strings.NewReader(got)); err == nil || !strings.Contains(err.Error(), `"GUESS:RATE" is not a value source`) {
		t.Errorf("the unconfirmed draft's rate: LoadRules says %v", err)
	}
	// Deleting the marker is not enough for the rate: it must be written.
	if _, err := LoadRules("draft.yaml", strings.NewReader(confirm(got))); err == nil || !strings.Contains(err.Error(), `"RATE" is not a value source`) {
		t.Errorf("the draft with its markers deleted but no rate written: LoadRules says %v", err)
	}
	written := strings.Replace(confirm(got), "rate: RATE", "rate: 250", 1)
	r, err := LoadRules("draft.yaml", strings.NewReader(written))
	if err != nil {
		t.Fatalf("the confirmed draft does not load: %v\n%s", err, written)
	}
	if err := Unconfirmed(r); err != nil {
		t.Errorf("Unconfirmed after confirming: %v", err)
	}
}

// TestUnconfirmed: a guessed code is refused with its line and what to do.
func TestUnconfirmed(t *testing.T) {
	const file = "version: 1\nrules:\n  - name: Design\n    match: {type: Design}\n    code: GUESS:T1\n    units: hours\n"
	r, err := LoadRules("draft.yaml", strings.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	err = Unconfirmed(r)
	want := `draft.yaml:3: rules[0].code: rule "Design": code GUESS:T1 is a guess of paysync rules init, not confirmed (check it against paysync meta, then write code: T1 (delete "GUESS:") or the right code)`
	if err == nil || err.Error() != want {
		t.Errorf("Unconfirmed = %v\nwant %s", err, want)
	}
	r, err = LoadRules("draft.yaml", strings.NewReader(confirm(file)))
	if err != nil || Unconfirmed(r) != nil {
		t.Errorf("confirmed: %v, %v", err, Unconfirmed(r))
	}
}

// TestDraft_AmbiguousDates: without a day above 12, the date format is a
// guess written commented out (the dates do not read until it is
// uncommented); the rows are read with it for the people and rules.
func TestDraft_AmbiguousDates(t *testing.T) {
	csv := "id,email,date,hours,type\n1,mette.hansen@nordlys.dk,02/11/2026,7.5,normal\n2,lars.nielsen@nordlys.dk,03/11/2026,2,Overtime\n"
	got, sum := draftOf(t, "a.csv", []byte(csv))
	for _, want := range []string{
		"    #GUESS: date_format: DD/MM/YYYY", "no day above 12 seen (02/11/2026)", "else write date_format: MM/DD/YYYY",
		"mette.hansen@nordlys.dk: E1", "lars.nielsen@nordlys.dk: E2", "type: Overtime", "code: GUESS:T2",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the draft lacks %q:\n%s", want, got)
		}
	}
	if sum.Unmatched != 0 || sum.Rules != 2 {
		t.Errorf("summary %+v, want nothing unmatched, 2 rules", sum)
	}
	r, err := LoadRules("a.yaml", strings.NewReader(strings.ReplaceAll(confirm(got), "rate: RATE", "rate: 250")))
	if err != nil {
		t.Fatal(err)
	}
	if r.Read.Formats[FormatCSV].DateFormat != "DD/MM/YYYY" {
		t.Errorf("confirmed read.csv = %+v", r.Read.Formats[FormatCSV])
	}
}

func TestDateSetting(t *testing.T) {
	tests := []struct {
		name   string
		format Format
		dates  []string
		value  string
		guess  bool
		note   string // a part of it
	}{
		{"iso", FormatToggl, []string{"2026-11-02", "2026-11-9"}, "YYYY-MM-DD", false, "every date is year-month-day"},
		{"us", FormatClockify, []string{"11/02/2026", "11/13/2026"}, "MM/DD/YYYY", false, "11/13/2026 has the day second"},
		{"day first", FormatCSV, []string{"13.11.2026", "02.11.2026"}, "DD.MM.YYYY", false, "13.11.2026 has the day first"},
		{"ambiguous clockify", FormatClockify, []string{"11/02/2026"}, "MM/DD/YYYY", true, "no day above 12"},
		{"ambiguous csv", FormatCSV, []string{"02/11/2026"}, "DD/MM/YYYY", true, "else write date_format: MM/DD/YYYY"},
		{"harvest mixed", FormatHarvest, []string{"2026-11-04", "11/5/2026"}, "MM/DD/YYYY", false, "year-first dates (2026-11-04) are read too"},
		{"harvest iso", FormatHarvest, []string{"2026-11-04"}, "", false, "Harvest's default also reads M/D/YYYY"},
		{"timestamps", FormatCSV, []string{"2026-11-02T23:30:00Z"}, "YYYY-MM-DD", false, "year-month-day"},
		{"unknown", FormatCSV, []string{"Nov 2, 2026"}, "", false, "not in a format paysync reads"},
		{"contradiction", FormatCSV, []string{"13/11/2026", "11/13/2026"}, "", false, "day and month disagree"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := dateSetting(tt.format, tt.dates)
			if s.value != tt.value || s.guess != tt.guess || !strings.Contains(s.note, tt.note) {
				t.Errorf("dateSetting = %+v, want value %q, guess %v, note with %q", s, tt.value, tt.guess, tt.note)
			}
		})
	}
}

func TestCategory(t *testing.T) {
	for v, want := range map[string]string{
		"Design": "normal", "Overtime 50%": "overtime", "overtid": "overtime", "Sick leave": "sick", "Sygdom": "sick",
		"Kørsel": "mileage", "Ferie": "vacation", "Time off": "vacation", "Support": "normal", "Illustration": "normal", "National": "normal", "Night shift": "supplement",
	} {
		if got := category(v); got != want {
			t.Errorf("category(%q) = %q, want %q", v, got, want)
		}
	}
}
