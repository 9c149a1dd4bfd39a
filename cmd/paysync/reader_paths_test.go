package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync/internal/natstest"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/shopspring/decimal"
)

// readerPathFiles are real-export shapes whose reader settings live only
// in testdata/reader_paths/rules.yaml's read: block: Toggl (with a byte
// order mark, Ja/Nej/いいえ and an unpadded date), Clockify from a US
// workspace (MM/DD/YYYY, read.clockify.date_format), Harvest, a
// Windows-1252 CSV with a semicolon and decimal commas ("Søren
// Østergaard", read.csv), and NDJSON whose "start" timestamps fall on
// their dates in Europe/Copenhagen (read.time_zone).
var readerPathFiles = []string{"toggl.csv", "clockify.csv", "harvest.csv", "danish.csv", "tracker.ndjson"}

// wantReaderPaths is what payroll holds after any of the paths: the
// Windows-1252 name found (not "S\xf8ren"), the US dates read, and
// tracker.ndjson's 23:30Z entry in December, apart from November's. One
// pay part per company × employee × code × rate × month, whichever files
// its entries came from (Mette's T1 of November: 7.5 + 2; Lars's: 4 +
// 4.75).
var wantReaderPaths = []string{
	"MV8x|MV8xXzE=|T1|units=1.5",
	"MV8x|MV8xXzE=|T1|units=9.5",
	"MV8x|MV8xXzE=|T2|units=2.25 rate=300",
	"MV8x|MV8xXzI=|T1|units=8.75",
	"MV8x|MV8xXzM=|T1|units=6",
	"MV8x|MV8xXzM=|T2|units=1.5 rate=300",
	"MV8x|MV8xXzQ=|T1|units=7.5",
	"MV8x|MV8xXzQ=|T2|units=2.25 rate=300",
}

// TestReaderPaths_Identical: import, the inbox (run --once) and publish +
// the NATS consumer read the same exports with the settings of the rules
// file alone, and payroll ends up with the same pay parts.
func TestReaderPaths_Identical(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("testdata", "reader_paths"))
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(dir, "rules.yaml")
	var paths []string
	for _, f := range readerPathFiles {
		paths = append(paths, filepath.Join(dir, f))
	}
	const note = "danish.csv: read as Windows-1252 (detected)"

	t.Run("import", func(t *testing.T) {
		s := startSandbox(t, sandbox.Options{})
		env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"))
		r := runInProcess(t, env, append([]string{"import", "--rules", rules}, paths...)...)
		if r.code != 0 || !strings.Contains(r.stdout, note) {
			t.Fatalf("import: exit %d, want 0 and %q\n%s%s", r.code, note, r.stdout, r.stderr)
		}
		if got := payrollKeys(s.sb); !reflect.DeepEqual(got, wantReaderPaths) {
			t.Errorf("import: payroll holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantReaderPaths, "\n"))
		}
	})

	t.Run("inbox", func(t *testing.T) {
		s := startSandbox(t, sandbox.Options{})
		in := t.TempDir()
		for i, p := range paths {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(in, readerPathFiles[i]), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		env := with(s.env, "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_INBOX", in, "PAYSYNC_MAPPING", rules)
		if r := runInProcess(t, env, "run", "--once"); r.code != 0 {
			t.Fatalf("run --once: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		if got := payrollKeys(s.sb); !reflect.DeepEqual(got, wantReaderPaths) {
			t.Errorf("inbox: payroll holds\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantReaderPaths, "\n"))
		}
		var reports []string
		_ = filepath.WalkDir(in, func(p string, _ fs.DirEntry, err error) error {
			if err == nil && strings.Contains(filepath.Base(p), "danish") && strings.HasSuffix(p, ".report.txt") {
				reports = append(reports, p)
			}
			return nil
		})
		if len(reports) != 1 {
			t.Fatalf("danish.csv's inbox report: found %v", reports)
		}
		if b, _ := os.ReadFile(reports[0]); !strings.Contains(string(b), note) {
			t.Errorf("the inbox report does not say %q:\n%s", note, b)
		}
	})

	t.Run("publish and NATS", func(t *testing.T) {
		s := startSandbox(t, sandbox.Options{})
		ns := natstest.Start(t)
		env := with(s.env, "NATS_URL", ns.ClientURL(), "PAYSYNC_LEDGER", filepath.Join(t.TempDir(), "ledger.db"), "PAYSYNC_HTTP_ADDR", freeAddr(t),
			"PAYSYNC_BATCH_LINGER", "100ms", "PAYSYNC_RATE_LIMIT", "1000", "PAYSYNC_COMPANY_ID", sandbox.CompanyNordlys,
			"PAYSYNC_MAPPING", rules, "PAYSYNC_LOG_LEVEL", "error")
		delete(env, "PAYSYNC_TOKEN_FILE")
		d := startDaemon(t, "run", env)
		r := runInProcess(t, env, append([]string{"publish"}, paths...)...)
		if r.code != 0 || !strings.Contains(r.stdout, "published 11 entries") || !strings.Contains(r.stderr, note) {
			t.Fatalf("publish: exit %d, want 0, 11 entries and %q\n%s%s", r.code, note, r.stdout, r.stderr)
		}
		// Messages come one at a time: a group's pay part may be replaced
		// as its entries arrive, and ends as the one pay part of its total.
		deadline := time.Now().Add(30 * time.Second)
		for !reflect.DeepEqual(payrollKeys(s.sb), wantReaderPaths) {
			if time.Now().After(deadline) {
				t.Fatalf("payroll holds\n%s\nwant\n%s\n(totals %v)\ndaemon:\n%s", strings.Join(payrollKeys(s.sb), "\n"), strings.Join(wantReaderPaths, "\n"),
					reflect.DeepEqual(totalsOf(payrollKeys(s.sb)), totalsOf(wantReaderPaths)), d.stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		d.stop(t)
	})
}

// totalsOf sums the units of pay-part keys (company|employee|code|numbers)
// per company, employee, code and rate (a failure's hint: totals right,
// pay parts not one per group). tracker.ndjson's November and December
// parts of one person and code add up here.
func totalsOf(keys []string) []string {
	sums := map[string]decimal.Decimal{}
	for _, k := range keys {
		i := strings.LastIndexByte(k, '|')
		rate := ""
		var units decimal.Decimal
		for _, f := range strings.Fields(k[i+1:]) {
			name, v, _ := strings.Cut(f, "=")
			switch name {
			case "units":
				units = decimal.RequireFromString(v)
			case "rate":
				rate = v
			}
		}
		key := k[:i] + "|rate=" + rate
		sums[key] = sums[key].Add(units)
	}
	var out []string
	for k, v := range sums {
		out = append(out, k+"|units="+v.String())
	}
	sort.Strings(out)
	return out
}
