package main

// Issue 15's corrections for the two sources of `paysync run` (the file
// source has its own: worker/corrector_test.go, period_test.go,
// corrections_test.go). One scenario, fed the way each source takes it:
// the inbox a period statement per file (PAYSYNC_PERIOD, a fixed period or
// each row's month), NATS one message per entry (published with
// stream.Publish, and with `paysync publish`), with the daemon suite's
// drivers and harness (daemon_test.go).
//
//	go test -run 'TestCorrectionsDaemon' ./cmd/paysync/ -v

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/shopspring/decimal"
)

// The scenario's employees, as its group keys ("employee|code") use them.
const (
	cdMette  = sandbox.EmpMetteHansen
	cdLars   = sandbox.EmpLarsNielsen
	cdSofie  = sandbox.EmpSofieJensen
	cdAnders = sandbox.EmpAndersPedersen
)

// cdEntry is an entry of the scenario: hours as a decimal string; the tag
// "sick" makes them SYG, otherwise T1 (testdata/corrections_daemon/rules.yaml).
func cdEntry(id, emp, date, hours string, sick bool) paysync.Entry {
	e := paysync.Entry{ID: id, EmployeeID: emp, Date: date, Type: "work",
		Hours: paysync.HoursFromSeconds(decimal.RequireFromString(hours).Mul(decimal.NewFromInt(3600)).IntPart())}
	if sick {
		e.Tags = []string{"sick"}
	}
	return e
}

// cdScenario is the first export (v1), the corrected one as a complete
// statement (v2), and what changed as messages (delta: the changed
// entries, a tombstone for the one deleted, the added ones).
//
// v2 against v1: c1's duration 8 → 8.5; c3 loses its tag "sick" (8 hours
// move from SYG to T1); c6 is deleted; c9 is added; c0 is added, dated in
// October. o1 is dated in October in both.
func cdScenario() (v1, v2, delta []paysync.Entry) {
	v1 = []paysync.Entry{
		cdEntry("c1", cdMette, "2026-11-02", "8", false),
		cdEntry("c2", cdMette, "2026-11-03", "2", false),
		cdEntry("c3", cdLars, "2026-11-02", "8", true),
		cdEntry("c4", cdLars, "2026-11-03", "4", false),
		cdEntry("c5", cdSofie, "2026-11-04", "6", false),
		cdEntry("c6", cdSofie, "2026-11-05", "3", false),
		cdEntry("c7", cdSofie, "2026-11-06", "4", true),
		cdEntry("c8", cdAnders, "2026-11-02", "5", false),
		cdEntry("o1", cdSofie, "2026-10-30", "7", true),
	}
	changed := []paysync.Entry{
		cdEntry("c1", cdMette, "2026-11-02", "8.5", false),
		cdEntry("c3", cdLars, "2026-11-02", "8", false),
	}
	added := []paysync.Entry{
		cdEntry("c9", cdMette, "2026-11-10", "1.5", true),
		cdEntry("c0", cdLars, "2026-10-30", "7", false),
	}
	v2 = []paysync.Entry{changed[0], v1[1], changed[1], v1[3], v1[4], v1[6], v1[7], v1[8], added[0], added[1]}
	delta = slices.Concat(changed, []paysync.Entry{{ID: "c6", Deleted: true}}, added)
	return v1, v2, delta
}

// cdPart is one pay part in payroll.
type cdPart struct{ id, units string }

// cdPayroll is payroll's pay parts of Nordlys by "employee|code", each
// group's parts sorted.
func cdPayroll(sb *sandbox.Server) map[string][]cdPart {
	out := map[string][]cdPart{}
	for _, c := range sb.State().Companies {
		if c.ID != sandbox.CompanyNordlys {
			continue
		}
		for _, p := range c.PayParts {
			k := p.EmployeeID + "|" + p.Code
			out[k] = append(out[k], cdPart{id: p.ID, units: p.Units.Decimal.String()})
		}
	}
	for _, ps := range out {
		slices.SortFunc(ps, func(a, b cdPart) int { return strings.Compare(a.units+a.id, b.units+b.id) })
	}
	return out
}

// cdDiff says how payroll's totals per group differ from want ("" when
// they are equal, exactly).
func cdDiff(got map[string][]cdPart, want map[string]string) string {
	var diffs []string
	for k, ps := range got {
		sum := decimal.Zero
		for _, p := range ps {
			sum = sum.Add(decimal.RequireFromString(p.units))
		}
		w, ok := want[k]
		if !ok || !sum.Equal(decimal.RequireFromString(w)) {
			diffs = append(diffs, fmt.Sprintf("%s holds %s %v, want %q", k, sum, ps, w))
		}
	}
	for k, w := range want {
		if _, ok := got[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s holds nothing, want %s", k, w))
		}
	}
	slices.Sort(diffs)
	return strings.Join(diffs, "; ")
}

// cdWrites counts payroll's create and delete calls.
func cdWrites(sb *sandbox.Server) (creates, deletes int) {
	r := sb.State().Counters.Requests
	return r["create_pay_parts"], r["delete_pay_parts"]
}

// cdSource feeds one source of the daemon the scenario's steps and says
// when the source has taken a step's input.
type cdSource interface {
	first(t *testing.T, v1 []paysync.Entry)
	corrected(t *testing.T, v2, delta []paysync.Entry)
	// again gives the corrected input again, in every form the source
	// can see it again.
	again(t *testing.T, v2, delta []paysync.Entry)
	// taken waits until the source has taken everything given to it.
	taken(t *testing.T)
	check(t *testing.T) // checks of the source's own (reports)
}

// TestCorrectionsDaemon: per source of `paysync run`, an export, then its
// correction (a changed duration, a changed tag that moves hours to
// another code, a deleted row: left out of a period statement or a
// tombstone, an added row, a row dated outside the period); payroll ends
// at the corrected totals per employee × code, the pay parts of groups
// the correction does not touch keep their payroll ids, and the same
// corrected input again makes no call to payroll.
func TestCorrectionsDaemon(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes; skipped with -short")
	}
	// Totals per employee × code.
	fixedV1 := map[string]string{
		cdMette + "|T1": "10", cdLars + "|SYG": "8", cdLars + "|T1": "4",
		cdSofie + "|T1": "9", cdSofie + "|SYG": "4", cdAnders + "|T1": "5",
	}
	fixedV2 := map[string]string{
		cdMette + "|T1": "10.5", cdMette + "|SYG": "1.5", cdLars + "|T1": "12",
		cdSofie + "|T1": "6", cdSofie + "|SYG": "4", cdAnders + "|T1": "5",
	}
	// With October's rows taken: o1 (Sofie, SYG 7) in v1, c0 (Lars, T1 7)
	// in v2, each a pay part of its own period, not summed with November.
	octV1 := with(fixedV1, cdSofie+"|SYG", "11")
	octV2 := with(fixedV2, cdSofie+"|SYG", "11", cdLars+"|T1", "19")
	cases := []struct {
		name      string
		source    func(t *testing.T, h *daemonHarness) cdSource
		drv       func(t *testing.T) sourceDriver
		env       map[string]string
		want1     map[string]string
		want2     map[string]string
		untouched []string // groups v2 leaves as they were: their pay parts keep their ids
		own       []string // "group|units": a pay part of its own (October's)
	}{
		{
			name: "inbox/period_2026-11", drv: newInboxDriver, source: newCDInbox("2026-11"),
			env:   map[string]string{"PAYSYNC_PERIOD": "2026-11"},
			want1: fixedV1, want2: fixedV2,
			untouched: []string{cdSofie + "|SYG", cdAnders + "|T1"},
		},
		{
			name: "inbox/period_month", drv: newInboxDriver, source: newCDInbox("month"),
			env:   map[string]string{"PAYSYNC_PERIOD": "month"},
			want1: octV1, want2: octV2,
			untouched: []string{cdSofie + "|SYG", cdAnders + "|T1"},
			own:       []string{cdSofie + "|SYG|7", cdSofie + "|SYG|4", cdLars + "|T1|7"},
		},
		{
			name: "nats/stream.Publish", drv: newNATSDriver, source: newCDNATS(false),
			want1: octV1, want2: octV2,
			untouched: []string{cdSofie + "|SYG", cdAnders + "|T1"},
			own:       []string{cdSofie + "|SYG|7", cdLars + "|T1|7"},
		},
		{
			name: "nats/paysync_publish", drv: newNATSDriver, source: newCDNATS(true),
			want1: octV1, want2: octV2,
			untouched: []string{cdSofie + "|SYG", cdAnders + "|T1"},
			own:       []string{cdSofie + "|SYG|7", cdLars + "|T1|7"},
		},
	}
	rules, err := filepath.Abs("testdata/corrections_daemon/rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			defer func() { t.Logf("took %s", time.Since(start).Round(time.Millisecond)) }()
			h := newDaemonHarness(t, c.drv(t), "corrections")
			h.env["PAYSYNC_MAPPING"] = rules
			for k, v := range c.env {
				h.env[k] = v
			}
			src := c.source(t, h)
			v1, v2, delta := cdScenario()

			d := h.start(t)
			src.first(t, v1)
			first := cdWaitTotals(t, h, src, "v1", c.want1)

			src.corrected(t, v2, delta)
			second := cdWaitTotals(t, h, src, "v2 (corrected)", c.want2)
			t.Logf("payroll after v1: %v\nafter v2: %v", first, second)
			for _, g := range c.untouched {
				if !slices.Equal(first[g], second[g]) {
					t.Errorf("%s, which the correction does not touch: pay parts %v became %v (want the same payroll ids)", g, first[g], second[g])
				}
			}
			for _, o := range c.own {
				g := o[:strings.LastIndex(o, "|")]
				units := o[len(g)+1:]
				if !slices.ContainsFunc(second[g], func(p cdPart) bool { return p.units == units }) {
					t.Errorf("%s: no pay part of %s of its own (its period's) in %v", g, units, second[g])
				}
			}
			d.stop(t)
			units := cdCorrectionUnits(t, h)
			if len(units) == 0 {
				t.Errorf("the ledger records no correction unit after v2")
			}

			// The same corrected input again: no call.
			d = h.start(t)
			creates, deletes := cdWrites(h.sb)
			src.again(t, v2, delta)
			third := cdWaitTotals(t, h, src, "the corrected input again", c.want2)
			d.stop(t)
			if c2, d2 := cdWrites(h.sb); c2 != creates || d2 != deletes {
				t.Errorf("the corrected input again: %d create_pay_parts and %d delete_pay_parts calls, want none", c2-creates, d2-deletes)
			}
			for g, ps := range second {
				if !slices.Equal(ps, third[g]) {
					t.Errorf("the corrected input again: %s %v became %v", g, ps, third[g])
				}
			}
			if again := cdCorrectionUnits(t, h); len(again) != len(units) {
				t.Errorf("the corrected input again: %d correction units, %d before", len(again), len(units))
			}
			src.check(t)
		})
	}
}

// cdWaitTotals waits until the source took its input, payroll holds want
// and no call is under way, and returns payroll's pay parts.
func cdWaitTotals(t *testing.T, h *daemonHarness, src cdSource, step string, want map[string]string) map[string][]cdPart {
	t.Helper()
	src.taken(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := cdPayroll(h.sb)
		if cdDiff(got, want) == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: payroll's totals per employee × code differ: %s", step, cdDiff(got, want))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Until no call comes for a while: what a wrong correction would send
	// (deletes, creates) has had its look of the sending loop.
	waitFor(t, step+": calls to payroll to stop", 30*time.Second, func() bool {
		c, d := cdWrites(h.sb)
		time.Sleep(700 * time.Millisecond)
		c2, d2 := cdWrites(h.sb)
		return c == c2 && d == d2 && h.drv.drained(t)
	})
	got := cdPayroll(h.sb)
	if diff := cdDiff(got, want); diff != "" {
		t.Fatalf("%s: payroll's totals per employee × code differ: %s", step, diff)
	}
	return got
}

// cdCorrectionUnits reads the ledger's correction units (the daemon has
// stopped): each done, none pending.
func cdCorrectionUnits(t *testing.T, h *daemonHarness) []ledger.CorrectionUnit {
	t.Helper()
	ctx := context.Background()
	l, err := ledger.Open(ctx, h.env["PAYSYNC_LEDGER"], ledger.Options{})
	if err != nil {
		t.Fatalf("open the ledger: %v", err)
	}
	defer l.Close()
	// Everything intake recorded (corrections, tombstones, statements)
	// is in the desired state, and payroll holds it: no group of an open
	// period is left to plan.
	unabsorbed, err := l.Unabsorbed(ctx, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(unabsorbed) > 0 {
		t.Errorf("%d entry versions are not taken into the desired state (not applied)", len(unabsorbed))
	}
	dirty, err := l.Groups(ctx, ledger.GroupFilter{Dirty: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirty) > 0 {
		t.Errorf("%d groups changed since planned (not reconciled): %+v", len(dirty), dirty[0].Key)
	}
	units, err := l.ListCorrections(ctx, ledger.CorrectionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range units {
		if u.State != ledger.CorrectionDone {
			t.Errorf("correction unit %d (import %d, %s): %s, want done", u.ID, u.SourceID, u.ImportName, u.State)
		}
	}
	return units
}

// ---- the inbox ----

// cdInbox drops each step as one NDJSON file, a period statement
// (PAYSYNC_PERIOD).
type cdInbox struct {
	d      *inboxDriver
	period string
	files  []string // stems of the files dropped, in order
}

func newCDInbox(period string) func(t *testing.T, h *daemonHarness) cdSource {
	return func(t *testing.T, h *daemonHarness) cdSource {
		return &cdInbox{d: h.drv.(*inboxDriver), period: period}
	}
}

func (s *cdInbox) drop(t *testing.T, stem string, entries []paysync.Entry) {
	t.Helper()
	s.d.drop(t, stem, entries)
	s.files = append(s.files, fmt.Sprintf("%s-%03d", stem, s.d.files))
}

func (s *cdInbox) first(t *testing.T, v1 []paysync.Entry) { s.drop(t, "v1", v1) }

func (s *cdInbox) corrected(t *testing.T, v2, _ []paysync.Entry) { s.drop(t, "v2", v2) }

// again: the same file under another name, the same rows in another
// order, and (for a statement per row's month) November's rows alone: a
// statement of November that leaves October as it is.
func (s *cdInbox) again(t *testing.T, v2, _ []paysync.Entry) {
	s.drop(t, "v2-same", v2)
	s.taken(t)
	reordered := slices.Clone(v2)
	slices.Reverse(reordered)
	s.drop(t, "v2-reordered", reordered)
	if s.period == "month" {
		s.taken(t)
		s.drop(t, "v2-november", slices.DeleteFunc(slices.Clone(v2), func(e paysync.Entry) bool { return strings.HasPrefix(e.Date, "2026-10") }))
	}
}

// taken waits until every file dropped was moved with its report; a file
// in failed/ ends the test.
func (s *cdInbox) taken(t *testing.T) {
	t.Helper()
	waitFor(t, "the inbox to take "+strings.Join(s.files, ", "), 30*time.Second, func() bool {
		if failed, _ := filepath.Glob(filepath.Join(s.d.dir, "failed", "*.report.txt")); len(failed) > 0 {
			b, _ := os.ReadFile(failed[0])
			t.Fatalf("the inbox failed %s:\n%s", filepath.Base(failed[0]), b)
		}
		for _, f := range s.files {
			if s.report(t, f) == "" {
				return false
			}
		}
		return s.d.drained(t)
	})
}

// report is the processed report of the file dropped as stem ("" none yet).
func (s *cdInbox) report(t *testing.T, stem string) string {
	ms, err := filepath.Glob(filepath.Join(s.d.dir, "processed", "*-"+stem+".*report.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) == 0 {
		return ""
	}
	b, err := os.ReadFile(ms[0])
	if err != nil {
		return "" // being written
	}
	return string(b)
}

// check: with a fixed period, a row dated outside it is a warning naming
// the entry and the period, in the report of its file (the one place an
// inbox user reads).
func (s *cdInbox) check(t *testing.T) {
	if s.period != "2026-11" {
		return
	}
	for _, c := range []struct{ file, entry string }{{s.files[0], "o1"}, {s.files[1], "c0"}} {
		r := s.report(t, c.file)
		if !strings.Contains(r, "entry "+c.entry) || !strings.Contains(r, "outside 2026-11") {
			t.Errorf("the report of %s does not say that entry %s is outside 2026-11 (not imported):\n%s", c.file, c.entry, r)
		}
	}
}

// ---- NATS ----

// cdNATS publishes each entry as a message: with stream.Publish, or with
// `paysync publish` (cli).
type cdNATS struct {
	d   *natsDriver
	cli bool
	dir string
}

func newCDNATS(cli bool) func(t *testing.T, h *daemonHarness) cdSource {
	return func(t *testing.T, h *daemonHarness) cdSource {
		return &cdNATS{d: h.drv.(*natsDriver), cli: cli, dir: t.TempDir()}
	}
}

// publish publishes entries; wantDups is how many the server must drop
// as duplicates within its window (`paysync publish` only).
func (s *cdNATS) publish(t *testing.T, name string, entries []paysync.Entry, wantDups int) {
	t.Helper()
	if !s.cli {
		s.d.publish(t, entries) // fails on any message the server drops
		return
	}
	var b strings.Builder
	for _, e := range entries {
		line, err := jsonMarshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	file := filepath.Join(s.dir, name+".ndjson")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runBinary(t, s.d.env(), "publish", "--source", daemonSubjectSource, "--company", sandbox.CompanyNordlys, file)
	want := fmt.Sprintf("published %s (%s dropped by the server", plural(len(entries)-wantDups, "entry", "entries"), plural(wantDups, "duplicate", "duplicates"))
	if r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Fatalf("paysync publish %s: exit %d, want 0 and %q\nstdout: %s\nstderr: %s", name, r.code, want, r.stdout, r.stderr)
	}
}

func (s *cdNATS) first(t *testing.T, v1 []paysync.Entry) { s.publish(t, "v1", v1, 0) }

// corrected publishes what changed, within the stream's duplicate
// window of v1: the corrected versions must not be dropped.
func (s *cdNATS) corrected(t *testing.T, _, delta []paysync.Entry) { s.publish(t, "v2", delta, 0) }

// again: `paysync publish` of the same versions is dropped by the server
// (the same Nats-Msg-Id); then the same messages under other message ids,
// so that they reach paysync.
func (s *cdNATS) again(t *testing.T, _, delta []paysync.Entry) {
	if s.cli {
		s.publish(t, "v2-again", delta, len(delta))
	}
	s.d.feedDuplicates(t, delta)
}

func (s *cdNATS) taken(t *testing.T) {
	waitFor(t, "the stream drained", 30*time.Second, func() bool { return s.d.drained(t) })
}

// check: nothing was dead-lettered.
func (s *cdNATS) check(t *testing.T) {
	if p := s.d.parked(t); len(p) > 0 {
		t.Errorf("dead letters: %v", p)
	}
}
