package paysync_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
)

// The ISO week facts below are calendar facts, checked by hand: 1 January
// 2026 is a Thursday, so 2026 has 53 ISO weeks (a year has 53 when it
// starts on a Thursday, or on a Wednesday in a leap year like 2020);
// 2025 (starts Wednesday, not leap) and 2027 (starts Friday) have 52.

func TestParsePeriod(t *testing.T) {
	tests := []struct {
		in          string
		first, last string
		kind        paysync.PeriodKind
	}{
		{"2026-11", "2026-11-01", "2026-11-30", paysync.PeriodMonth},
		{"2026-12", "2026-12-01", "2026-12-31", paysync.PeriodMonth},
		{"2026-01", "2026-01-01", "2026-01-31", paysync.PeriodMonth},
		{"2024-02", "2024-02-01", "2024-02-29", paysync.PeriodMonth}, // leap year
		{"2023-02", "2023-02-01", "2023-02-28", paysync.PeriodMonth},
		{"2000-02", "2000-02-01", "2000-02-29", paysync.PeriodMonth}, // divisible by 400: leap
		{"2100-02", "2100-02-01", "2100-02-28", paysync.PeriodMonth}, // divisible by 100: not
		{"2026-W45", "2026-11-02", "2026-11-08", paysync.PeriodWeek},
		{"2026-W01", "2025-12-29", "2026-01-04", paysync.PeriodWeek}, // week 1 holds the year's first Thursday
		{"2026-W53", "2026-12-28", "2027-01-03", paysync.PeriodWeek},
		{"2027-W01", "2027-01-04", "2027-01-10", paysync.PeriodWeek},
		{"2020-W53", "2020-12-28", "2021-01-03", paysync.PeriodWeek},
		{"2021-W01", "2021-01-04", "2021-01-10", paysync.PeriodWeek},
		{"2025-W01", "2024-12-30", "2025-01-05", paysync.PeriodWeek},
		{"2025-W52", "2025-12-22", "2025-12-28", paysync.PeriodWeek},
		{"2024-W09", "2024-02-26", "2024-03-03", paysync.PeriodWeek}, // across 29 February
		{"2026-11-02..2026-11-15", "2026-11-02", "2026-11-15", paysync.PeriodRange},
		{"2026-11-02..2026-11-02", "2026-11-02", "2026-11-02", paysync.PeriodRange},
		{"2026-11-01..2026-11-30", "2026-11-01", "2026-11-30", paysync.PeriodRange}, // a month written as a range stays one
		{"2026-12-16..2027-01-15", "2026-12-16", "2027-01-15", paysync.PeriodRange},
		{"2024-02-29..2024-03-01", "2024-02-29", "2024-03-01", paysync.PeriodRange},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := paysync.ParsePeriod(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.First().Format(time.DateOnly); got != tt.first {
				t.Errorf("First = %s, want %s", got, tt.first)
			}
			if got := p.Last().Format(time.DateOnly); got != tt.last {
				t.Errorf("Last = %s, want %s", got, tt.last)
			}
			for _, d := range []time.Time{p.First(), p.Last()} {
				if d.Location() != time.UTC || d.Hour() != 0 || d.Minute() != 0 || d.Second() != 0 || d.Nanosecond() != 0 {
					t.Errorf("day %v is not UTC midnight", d)
				}
			}
			if tt.kind == paysync.PeriodWeek && (p.First().Weekday() != time.Monday || p.Last().Weekday() != time.Sunday) {
				t.Errorf("week %s..%s is not Monday..Sunday", p.First().Weekday(), p.Last().Weekday())
			}
			if p.Kind() != tt.kind {
				t.Errorf("Kind = %q, want %q", p.Kind(), tt.kind)
			}
			if p.String() != tt.in {
				t.Errorf("String = %q, want %q", p.String(), tt.in)
			}
			if p.IsZero() {
				t.Error("IsZero")
			}
		})
	}
}

func TestParsePeriod_Invalid(t *testing.T) {
	tests := []struct{ in, why string }{
		{"", "not a month"},
		{"2026", "not a month"},
		{"2026-1", "not a month"},
		{"26-11", "not a month"},
		{"2026/11", "not a month"},
		{" 2026-11", "not a month"},
		{"2026-11 ", "not a month"},
		{"+026-11", "not a month"},
		{"2026-13", "month 13 does not exist"},
		{"2026-00", "month 00 does not exist"},
		{"0000-01", "year 0000 does not exist"},
		{"2025-W53", "2025 has 52 ISO weeks"},
		{"2027-W53", "2027 has 52 ISO weeks"},
		{"2026-W54", "2026 has 53 ISO weeks"},
		{"2026-W00", "week 00 does not exist"},
		{"2026-W5", "not a month"},
		{"2026-W045", "not a month"},
		{"2026-w45", "not a month"},
		{"2026W45", "not a month"},
		{"2026-W4x", "not a month"},
		{"2026-11-02", "not a month"}, // one day is a range: 2026-11-02..2026-11-02
		{"2026-11-15..2026-11-02", "2026-11-15 is after 2026-11-02"},
		{"2027-01-01..2026-12-31", "2027-01-01 is after 2026-12-31"},
		{"2026-11-02..", `"" is not a date`},
		{"..2026-11-02", `"" is not a date`},
		{"2026-11-02...2026-11-15", `".2026-11-15" is not a date`},
		{"2026-11-02 .. 2026-11-15", `"2026-11-02 " is not a date`},
		{"2026-11-02..2026-11-15..2026-11-20", `"2026-11-15..2026-11-20" is not a date`},
		{"2026-11-2..2026-11-15", `"2026-11-2" is not a date`},
		{"2026-02-30..2026-03-01", `"2026-02-30" is not a date`},
		{"2023-02-29..2023-03-01", `"2023-02-29" is not a date`},
		{"2026-11-01..2026-11-31", `"2026-11-31" is not a date`},
		{"2026-11-01T00:00:00Z..2026-11-02", "is not a date"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := paysync.ParsePeriod(tt.in)
			if err == nil {
				t.Fatalf("got %v, want an error", p)
			}
			msg := err.Error()
			for _, want := range []string{tt.why, `period "` + tt.in + `"`, "2026-11", "2026-W45", "2026-11-02..2026-11-15"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
			if !p.IsZero() {
				t.Errorf("with the error, period %v", p)
			}
		})
	}
}

func TestPeriod_Contains(t *testing.T) {
	tests := []struct {
		period string
		date   string
		want   bool
	}{
		{"2026-11", "2026-11-01", true},
		{"2026-11", "2026-11-30", true},
		{"2026-11", "2026-11-15", true},
		{"2026-11", "2026-10-31", false},
		{"2026-11", "2026-12-01", false},
		{"2026-11", "2025-11-15", false},
		{"2024-02", "2024-02-29", true},
		{"2026-W53", "2026-12-28", true},
		{"2026-W53", "2026-12-31", true},
		{"2026-W53", "2027-01-01", true},
		{"2026-W53", "2027-01-03", true},
		{"2026-W53", "2026-12-27", false},
		{"2026-W53", "2027-01-04", false},
		{"2026-W01", "2025-12-29", true},
		{"2026-W01", "2025-12-28", false},
		{"2026-11-02..2026-11-15", "2026-11-02", true},
		{"2026-11-02..2026-11-15", "2026-11-15", true},
		{"2026-11-02..2026-11-15", "2026-11-16", false},
		{"2026-11-02..2026-11-15", "2026-11-01", false},
		{"2026-11-02..2026-11-02", "2026-11-02", true},
		// Not a YYYY-MM-DD date: in no period.
		{"2026-11", "", false},
		{"2026-11", "2026-11", false},
		{"2026-11", "2026-11-1", false},
		{"2026-11", "2026-11-31", false},
		{"2026-11", "2026-11-15T10:00:00Z", false},
		{"2026-11", "15.11.2026", false},
		{"2026-11", " 2026-11-15", false},
	}
	for _, tt := range tests {
		t.Run(tt.period+"/"+tt.date, func(t *testing.T) {
			p := mustPeriod(t, tt.period)
			if got := p.Contains(tt.date); got != tt.want {
				t.Errorf("%s.Contains(%q) = %v, want %v", p, tt.date, got, tt.want)
			}
		})
	}
	if (paysync.Period{}).Contains("2026-11-15") {
		t.Error("the zero period contains a date")
	}
}

func TestPeriod_Overlaps(t *testing.T) {
	tests := []struct {
		p, q string
		want bool
	}{
		{"2026-11", "2026-11", true},
		{"2026-11", "2026-12", false},
		{"2026-11", "2026-W45", true},
		{"2026-10", "2026-W45", false}, // W45 starts on 2 November
		{"2026-10", "2026-W44", true},  // 26 October .. 1 November
		{"2026-11", "2026-W44", true},
		{"2026-12", "2026-W53", true},
		{"2027-01", "2026-W53", true},
		{"2027-02", "2026-W53", false},
		{"2026-W52", "2026-W53", false},
		{"2026-11-01..2026-11-15", "2026-11-15..2026-11-30", true}, // one shared day
		{"2026-11-01..2026-11-14", "2026-11-15..2026-11-30", false},
		{"2026-11-01..2026-11-30", "2026-11", true},
		{"2026-11-10..2026-11-12", "2026-11", true}, // one inside the other
		{"2026-10-15..2027-01-15", "2026-11", true},
	}
	for _, tt := range tests {
		t.Run(tt.p+"/"+tt.q, func(t *testing.T) {
			p, q := mustPeriod(t, tt.p), mustPeriod(t, tt.q)
			if got := p.Overlaps(q); got != tt.want {
				t.Errorf("%s.Overlaps(%s) = %v, want %v", p, q, got, tt.want)
			}
			if got := q.Overlaps(p); got != tt.want {
				t.Errorf("%s.Overlaps(%s) = %v, want %v", q, p, got, tt.want)
			}
		})
	}
	var zero paysync.Period
	if p := mustPeriod(t, "2026-11"); zero.Overlaps(p) || p.Overlaps(zero) || zero.Overlaps(zero) {
		t.Error("the zero period overlaps")
	}
}

func TestPeriodOf(t *testing.T) {
	tests := []struct {
		kind paysync.PeriodKind
		date string
		want string
	}{
		{paysync.PeriodMonth, "2026-11-15", "2026-11"},
		{paysync.PeriodMonth, "2026-12-31", "2026-12"},
		{paysync.PeriodMonth, "2027-01-01", "2027-01"},
		{paysync.PeriodMonth, "2024-02-29", "2024-02"},
		{paysync.PeriodWeek, "2026-11-02", "2026-W45"},
		{paysync.PeriodWeek, "2026-11-08", "2026-W45"},
		{paysync.PeriodWeek, "2026-11-09", "2026-W46"},
		{paysync.PeriodWeek, "2026-12-31", "2026-W53"},
		{paysync.PeriodWeek, "2027-01-01", "2026-W53"}, // a Friday: still the week of 31 December
		{paysync.PeriodWeek, "2027-01-03", "2026-W53"},
		{paysync.PeriodWeek, "2027-01-04", "2027-W01"},
		{paysync.PeriodWeek, "2025-12-29", "2026-W01"}, // a Monday in December, in next year's week 1
		{paysync.PeriodWeek, "2026-01-01", "2026-W01"},
		{paysync.PeriodWeek, "2025-12-28", "2025-W52"},
		{paysync.PeriodWeek, "2021-01-03", "2020-W53"},
		{paysync.PeriodWeek, "2024-02-29", "2024-W09"},
		{paysync.PeriodWeek, "2024-12-30", "2025-W01"},
	}
	for _, tt := range tests {
		t.Run(string(tt.kind)+"/"+tt.date, func(t *testing.T) {
			p, err := paysync.PeriodOf(tt.kind, tt.date)
			if err != nil {
				t.Fatal(err)
			}
			if p.String() != tt.want || p.Kind() != tt.kind {
				t.Errorf("PeriodOf = %s (%s), want %s", p, p.Kind(), tt.want)
			}
			if !p.Contains(tt.date) {
				t.Errorf("%s does not contain %s", p, tt.date)
			}
			if want := mustPeriod(t, tt.want); p != want {
				t.Errorf("PeriodOf = %v, ParsePeriod(%q) = %v", p, tt.want, want)
			}
		})
	}
	for _, tt := range []struct {
		kind      paysync.PeriodKind
		date, msg string
	}{
		{paysync.PeriodMonth, "2026-02-30", `month period: "2026-02-30" is not a date YYYY-MM-DD`},
		{paysync.PeriodWeek, "", `week period: "" is not a date`},
		{paysync.PeriodWeek, "2026-W45", `"2026-W45" is not a date`},
		{paysync.PeriodWeek, "0000-06-01", `"0000-06-01" is not a date: year 0000 does not exist`},
		{paysync.PeriodRange, "2026-11-15", `period kind "range": want month or week`},
		{"year", "2026-11-15", `period kind "year": want month or week`},
		{"", "2026-11-15", `period kind "": want month or week`},
	} {
		if p, err := paysync.PeriodOf(tt.kind, tt.date); err == nil || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("PeriodOf(%q, %q) = %v, %v; want an error with %q", tt.kind, tt.date, p, err, tt.msg)
		}
	}
}

// Every day of 2015..2032 (three years of 53 ISO weeks among them) lies in
// its month and its week, as ParsePeriod reads their names back.
func TestPeriodOf_EveryDay(t *testing.T) {
	end := time.Date(2033, 1, 1, 0, 0, 0, 0, time.UTC)
	weeks := map[string]int{}
	for d := time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC); d.Before(end); d = d.AddDate(0, 0, 1) {
		date := d.Format(time.DateOnly)
		for _, kind := range []paysync.PeriodKind{paysync.PeriodMonth, paysync.PeriodWeek} {
			p, err := paysync.PeriodOf(kind, date)
			if err != nil {
				t.Fatal(err)
			}
			back, err := paysync.ParsePeriod(p.String())
			if err != nil || back != p {
				t.Fatalf("%s: %s period %s reads back as %v, %v", date, kind, p, back, err)
			}
			if !p.Contains(date) || p.Contains(p.First().AddDate(0, 0, -1).Format(time.DateOnly)) ||
				p.Contains(p.Last().AddDate(0, 0, 1).Format(time.DateOnly)) {
				t.Fatalf("%s: %s period %s", date, kind, p)
			}
			if kind == paysync.PeriodWeek {
				weeks[p.String()]++
			}
		}
	}
	// The loop starts on Thursday 1 January 2015 (in 2015-W01, from 29
	// December 2014) and ends on Friday 31 December 2032 (in 2032-W53).
	var w53 []string
	for w, days := range weeks {
		if days != 7 && w != "2015-W01" && w != "2032-W53" {
			t.Errorf("week %s has %d days", w, days)
		}
		if strings.HasSuffix(w, "-W53") {
			w53 = append(w53, w)
		}
	}
	slices.Sort(w53)
	if want := []string{"2015-W53", "2020-W53", "2026-W53", "2032-W53"}; !slices.Equal(w53, want) {
		t.Errorf("weeks 53: %v, want %v", w53, want)
	}
}

func TestParsePeriodKind(t *testing.T) {
	for in, want := range map[string]paysync.PeriodKind{"month": paysync.PeriodMonth, "week": paysync.PeriodWeek} {
		if got, err := paysync.ParsePeriodKind(in); err != nil || got != want {
			t.Errorf("ParsePeriodKind(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "range", "Month", "2026-11", "year"} {
		if got, err := paysync.ParsePeriodKind(in); err == nil || !strings.Contains(err.Error(), "want month or week") {
			t.Errorf("ParsePeriodKind(%q) = %q, %v; want an error", in, got, err)
		}
	}
}

// A period is written in JSON and in flags as its canonical form.
func TestPeriod_Text(t *testing.T) {
	type doc struct {
		Period paysync.Period `json:"period"`
	}
	for _, s := range []string{"2026-11", "2026-W53", "2026-11-02..2026-11-15"} {
		b, err := json.Marshal(doc{mustPeriod(t, s)})
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"period":"` + s + `"}`; string(b) != want {
			t.Errorf("JSON %s, want %s", b, want)
		}
		var back doc
		if err := json.Unmarshal(b, &back); err != nil || back.Period != mustPeriod(t, s) {
			t.Errorf("%s reads back as %v, %v", b, back.Period, err)
		}
	}
	var d doc
	if err := json.Unmarshal([]byte(`{"period":"2026-13"}`), &d); err == nil || !strings.Contains(err.Error(), `period "2026-13"`) {
		t.Errorf("bad period in JSON: %v", err)
	}
	if b, _ := json.Marshal(doc{}); string(b) != `{"period":""}` {
		t.Errorf("zero period: %s", b)
	}
}

func mustPeriod(t *testing.T, s string) paysync.Period {
	t.Helper()
	p, err := paysync.ParsePeriod(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
