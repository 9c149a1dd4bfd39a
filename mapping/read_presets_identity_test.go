package mapping

import (
	"encoding/csv"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
)

// presetRow is one row of a preset export as header → cell, so a case
// can say which cells it changes.
type presetRow map[string]string

// identityPreset is a preset's header and a base row for the identity
// table below.
type identityPreset struct {
	format Format
	opts   ReadOptions
	header []string
	base   presetRow
}

var identityPresets = map[Format]identityPreset{
	FormatToggl: {
		format: FormatToggl,
		header: []string{"User", "Email", "Client", "Project", "Task", "Description", "Billable", "Start date", "Start time", "End date", "End time", "Duration", "Tags", "Amount (EUR)"},
		base: presetRow{"User": "Ann Berg", "Email": "ann@example.com", "Client": "Acme", "Project": "Website", "Task": "Design",
			"Description": "Header", "Billable": "Yes", "Start date": "2024-03-04", "Start time": "09:00:00", "End date": "2024-03-04",
			"End time": "17:00:00", "Duration": "08:00:00", "Tags": "onsite", "Amount (EUR)": "400.00"},
	},
	FormatClockify: {
		format: FormatClockify, opts: ReadOptions{DateFormat: "MM/DD/YYYY"},
		header: []string{"Project", "Client", "Description", "Task", "User", "Group", "Email", "Tags", "Billable", "Start Date", "Start Time", "End Date", "End Time", "Duration (h)", "Duration (decimal)", "Billable Rate (USD)", "Billable Amount (USD)"},
		base: presetRow{"Project": "Website", "Client": "Acme", "Description": "Header", "Task": "Design", "User": "Ann Berg", "Group": "Team A",
			"Email": "ann@example.com", "Tags": "onsite", "Billable": "Yes", "Start Date": "03/04/2024", "Start Time": "09:00:00 AM",
			"End Date": "03/04/2024", "End Time": "05:00:00 PM", "Duration (h)": "08:00:00", "Duration (decimal)": "8.00",
			"Billable Rate (USD)": "50.00", "Billable Amount (USD)": "400.00"},
	},
	FormatHarvest: {
		format: FormatHarvest,
		header: []string{"Date", "Client", "Project", "Project Code", "Task", "Notes", "Hours", "Hours Rounded", "Billable?", "Invoiced?", "Approved?", "First Name", "Last Name", "Roles", "Employee?", "Billable Rate", "Billable Amount", "Cost Rate", "Cost Amount", "Currency", "External Reference URL", "Employee Id", "Teams"},
		base: presetRow{"Date": "2024-03-04", "Client": "Acme", "Project": "Website", "Project Code": "WEB", "Task": "Design", "Notes": "Header",
			"Hours": "8", "Hours Rounded": "8", "Billable?": "Yes", "Invoiced?": "No", "Approved?": "Yes", "First Name": "Ann", "Last Name": "Berg",
			"Roles": "Designer", "Employee?": "Yes", "Billable Rate": "100", "Billable Amount": "800", "Cost Rate": "50", "Cost Amount": "400",
			"Currency": "Euro - EUR", "External Reference URL": "", "Employee Id": "E-17", "Teams": "Team A"},
	},
}

// presetCSV writes rows (the preset's base row with each one's changes)
// as an export of the preset.
func presetCSV(t *testing.T, p identityPreset, rows ...presetRow) string {
	t.Helper()
	var b strings.Builder
	w := csv.NewWriter(&b)
	if err := w.Write(p.header); err != nil {
		t.Fatal(err)
	}
	for _, changes := range rows {
		for h := range changes {
			if !slices.Contains(p.header, h) {
				t.Fatalf("%s has no column %q", p.format, h)
			}
		}
		rec := make([]string, len(p.header))
		for i, h := range p.header {
			v, ok := changes[h]
			if !ok {
				v = p.base[h]
			}
			rec[i] = v
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	return b.String()
}

// presetIDs reads an export and returns its entries' ids, failing on a
// problem.
func presetIDs(t *testing.T, p identityPreset, data string) []string {
	t.Helper()
	opts := p.opts
	opts.Format = p.format
	rd, _, err := NewReader("export.csv", strings.NewReader(data), opts)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for {
		e, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return ids
		}
		if err != nil {
			t.Fatalf("%v\n%s", err, data)
		}
		ids = append(ids, e.ID)
	}
}

// A preset row's id is its natural key: a corrected row (another
// duration, end, tag, billable flag or amount) keeps its id, so it is a
// correction of the entry; a row that is another piece of work (another
// start, date, person, project, task or description) gets another id.
func TestPresetIdentity(t *testing.T) {
	cases := []struct {
		format   Format
		name     string
		from, to presetRow // changes to the base row on each side
		same     bool
	}{
		{FormatToggl, "duration and end time", nil, presetRow{"Duration": "08:30:00", "End time": "17:30:00", "Amount (EUR)": "425.00"}, true},
		{FormatToggl, "end time only", nil, presetRow{"End time": "17:30:00"}, true},
		{FormatToggl, "end date", nil, presetRow{"End date": "2024-03-05", "Duration": "32:00:00"}, true},
		{FormatToggl, "tags", nil, presetRow{"Tags": "overtime, onsite"}, true},
		{FormatToggl, "billable", nil, presetRow{"Billable": "No", "Amount (EUR)": "0.00"}, true},
		{FormatToggl, "user renamed, same email", nil, presetRow{"User": "Ann Berg-Lund"}, true},
		{FormatToggl, "email case", nil, presetRow{"Email": "Ann@Example.com"}, true},
		{FormatToggl, "client", nil, presetRow{"Client": "Acme Inc"}, true},
		{FormatToggl, "start time", nil, presetRow{"Start time": "09:30:00"}, false},
		{FormatToggl, "start date", nil, presetRow{"Start date": "2024-03-05", "End date": "2024-03-05"}, false},
		{FormatToggl, "email", nil, presetRow{"Email": "bo@example.com"}, false},
		{FormatToggl, "no email: user", presetRow{"Email": ""}, presetRow{"Email": "", "User": "Bo Lund"}, false},
		{FormatToggl, "project", nil, presetRow{"Project": "Ops"}, false},
		{FormatToggl, "task", nil, presetRow{"Task": "Review"}, false},
		{FormatToggl, "description", nil, presetRow{"Description": "Footer"}, false},

		{FormatClockify, "duration and end time", nil, presetRow{"Duration (h)": "08:30:00", "Duration (decimal)": "8.50", "End Time": "05:30:00 PM", "Billable Amount (USD)": "425.00"}, true},
		{FormatClockify, "end time only", nil, presetRow{"End Time": "05:30:00 PM"}, true},
		{FormatClockify, "tags", nil, presetRow{"Tags": ""}, true},
		{FormatClockify, "billable", nil, presetRow{"Billable": "No", "Billable Rate (USD)": "0.00", "Billable Amount (USD)": "0.00"}, true},
		{FormatClockify, "user renamed, same email", nil, presetRow{"User": "Ann Berg-Lund"}, true},
		{FormatClockify, "start time", nil, presetRow{"Start Time": "09:30:00 AM"}, false},
		{FormatClockify, "start date", nil, presetRow{"Start Date": "03/05/2024"}, false},
		{FormatClockify, "email", nil, presetRow{"Email": "bo@example.com"}, false},
		{FormatClockify, "no email: user", presetRow{"Email": ""}, presetRow{"Email": "", "User": "Bo Lund"}, false},
		{FormatClockify, "project", nil, presetRow{"Project": "Ops"}, false},
		{FormatClockify, "task", nil, presetRow{"Task": "Review"}, false},
		{FormatClockify, "description", nil, presetRow{"Description": "Footer"}, false},

		{FormatHarvest, "hours", nil, presetRow{"Hours": "8.5", "Hours Rounded": "8.5", "Billable Amount": "850", "Cost Amount": "425"}, true},
		{FormatHarvest, "billable", nil, presetRow{"Billable?": "No", "Billable Amount": "0"}, true},
		{FormatHarvest, "approved", nil, presetRow{"Approved?": "No"}, true},
		{FormatHarvest, "name, same employee id", nil, presetRow{"Last Name": "Berg-Lund"}, true},
		{FormatHarvest, "date as M/D/YYYY", nil, presetRow{"Date": "3/4/2024"}, true},
		{FormatHarvest, "date", nil, presetRow{"Date": "2024-03-05"}, false},
		{FormatHarvest, "employee id", nil, presetRow{"Employee Id": "E-18"}, false},
		{FormatHarvest, "no employee id: name", presetRow{"Employee Id": ""}, presetRow{"Employee Id": "", "First Name": "Bo"}, false},
		{FormatHarvest, "project", nil, presetRow{"Project": "Ops"}, false},
		{FormatHarvest, "task", nil, presetRow{"Task": "Review"}, false},
		{FormatHarvest, "notes", nil, presetRow{"Notes": "Footer"}, false},
		{FormatHarvest, "external reference", nil, presetRow{"External Reference URL": "https://example.com/t/1"}, false},
	}
	for _, tc := range cases {
		t.Run(string(tc.format)+"/"+tc.name, func(t *testing.T) {
			p := identityPresets[tc.format]
			a := presetIDs(t, p, presetCSV(t, p, tc.from))
			b := presetIDs(t, p, presetCSV(t, p, tc.to))
			if len(a) != 1 || len(b) != 1 {
				t.Fatalf("read %v and %v, want one entry each", a, b)
			}
			if !strings.HasPrefix(a[0], string(tc.format)+"-") || len(a[0]) != len(tc.format)+1+16 {
				t.Errorf("id %q, want %s- and 16 hex digits", a[0], tc.format)
			}
			if same := a[0] == b[0]; same != tc.same {
				t.Errorf("ids %s and %s: same = %v, want %v", a[0], b[0], same, tc.same)
			}
		})
	}
}

// Rows sharing a natural key within one file are numbered in file order:
// the key alone for the first, then "-2", "-3"; swapping two such rows
// swaps their ids.
func TestPresetIdentity_Repeats(t *testing.T) {
	for _, format := range []Format{FormatToggl, FormatClockify, FormatHarvest} {
		t.Run(string(format), func(t *testing.T) {
			p := identityPresets[format]
			dur := map[Format]string{FormatToggl: "Duration", FormatClockify: "Duration (h)", FormatHarvest: "Hours"}[format]
			short, long := presetRow{dur: "1:00"}, presetRow{dur: "2:00"}
			one := presetIDs(t, p, presetCSV(t, p, nil))
			ids := presetIDs(t, p, presetCSV(t, p, short, long, short))
			want := []string{one[0], one[0] + "-2", one[0] + "-3"}
			if !slices.Equal(ids, want) {
				t.Errorf("ids %v, want %v", ids, want)
			}
			if swapped := presetIDs(t, p, presetCSV(t, p, long, short, short)); !slices.Equal(swapped, want) {
				t.Errorf("reordered: ids %v, want %v", swapped, want)
			}
		})
	}
}
