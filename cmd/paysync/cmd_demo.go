package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/paysync/paysync/deploy/examples"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker"
)

// runDemo shows the whole flow against an in-process sandbox with a
// temporary ledger: dry run, import, the batch, revert, the ledger's
// history, then a corrected re-export (one pay part replaced).
func runDemo(ctx context.Context, args []string, io stdio, _ lookupEnv) error {
	fs := newFlagSet("demo", "demo", io)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	start := time.Now()
	sb := sandbox.New(sandbox.Options{Rotate: true})
	base, err := sb.Start("127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("demo: start sandbox: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = sb.Close(cctx)
	}()
	dir, err := os.MkdirTemp("", "paysync-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer os.RemoveAll(dir)
	for _, name := range []string{"rules.yaml", "toggl.csv"} {
		b, err := examples.Files.ReadFile(name)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	rulesPath, export := filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "toggl.csv")

	o := sb.Options()
	env := map[string]string{
		"PAYSYNC_PAYROLL_URL": base, "PAYSYNC_AUTH_URL": base, "PAYSYNC_AUTH_REALM": o.Realm,
		"PAYSYNC_CLIENT_ID": o.ClientID, "PAYSYNC_CLIENT_SECRET": o.ClientSecret,
		"PAYSYNC_REFRESH_TOKEN": sb.IssueRefreshToken(),
		"PAYSYNC_LEDGER":        filepath.Join(dir, "ledger.db"),
		"PAYSYNC_MAPPING":       rulesPath,
		"PAYSYNC_LOG_LEVEL":     "warn",
	}
	cfg, err := loadConfig(ctx, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		return err
	}
	s, err := cfg.connect(ctx, io, true)
	if err != nil {
		return err
	}
	defer s.Close()
	w := io.out
	step := func(n int, title string) { fmt.Fprintf(w, "\n== %d. %s\n\n", n, title) }
	fmt.Fprintf(w, "paysync demo: payroll sandbox at %s, ledger %s (temporary; nothing leaves this machine)\n", base, env["PAYSYNC_LEDGER"])

	rules, err := loadRulesFile(rulesPath)
	if err != nil {
		return err
	}
	step(1, "dry run: what the Toggl export would become (paysync import --dry-run)")
	rep, err := planImport(ctx, s, rules, "", []string{export}, mapping.ReadOptions{}, importScope{}, nil, io.err)
	if err != nil {
		return err
	}
	if err := writeImportReport(w, rep); err != nil {
		return err
	}

	step(2, "import it: ledger first, then create_pay_parts (paysync import)")
	if err := sendImport(ctx, s, rules, []string{export}, mapping.ReadOptions{}, importScope{}, false, io); err != nil {
		return err
	}
	step(3, "import it again: a duplicate, nothing is sent")
	before := sb.State().Counters.Requests["create_pay_parts"]
	if err := sendImport(ctx, s, rules, []string{export}, mapping.ReadOptions{}, importScope{}, false, io); err != nil {
		return err
	}
	if after := sb.State().Counters.Requests["create_pay_parts"]; after != before {
		return fmt.Errorf("demo: the duplicate import sent %d create calls", after-before)
	}

	step(4, "the batch with its payroll ids and source lines (paysync batches show 1)")
	if err := showBatch(ctx, s.led, 1, false, io); err != nil {
		return err
	}

	step(5, "revert it (paysync revert 1 --yes)")
	d, err := demoOperation(ctx, s, rules, worker.Operation{Target: ledger.Target{Batches: []int64{1}}}, io)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "deleted %d pay parts; the sandbox now holds %d for the company\n", d.Stats.Deleted, len(sb.State().Companies[0].PayParts))

	step(6, "the ledger's history (paysync batches, and every attempt)")
	bs, err := s.led.ListBatches(ctx, ledgerFilterAll)
	if err != nil {
		return err
	}
	tb := newTable(w, "BATCH", "IMPORT", "COMPANY", "STATE", "PAY PARTS", "CREATED", "DELETED/GONE")
	for _, b := range bs {
		tb.row(fmt.Sprint(b.ID), fmt.Sprint(b.SourceID), b.CompanyID, string(b.State), fmt.Sprint(b.Items), fmt.Sprint(b.Created), fmt.Sprintf("%d/%d", b.Deleted, b.Gone))
	}
	if err := tb.flush(); err != nil {
		return err
	}
	atts, err := s.led.Attempts(ctx, 0, 0)
	if err != nil {
		return err
	}
	fmt.Fprintln(w)
	tb = newTable(w, "ATTEMPT", "BATCH", "OP", "ITEMS", "OUTCOME")
	for _, a := range atts {
		tb.row(fmt.Sprint(a.ID), fmt.Sprint(a.BatchID), string(a.Op), fmt.Sprint(a.Items), string(a.Outcome))
	}
	if err := tb.flush(); err != nil {
		return err
	}
	if err := demoCorrection(ctx, s, sb, rules, dir, step, io); err != nil {
		return err
	}
	fmt.Fprintf(w, "\ndone in %s: %s, %s\n", time.Since(start).Round(time.Millisecond), plural(int(s.cl.Calls()), "API call", "API calls"), plural(int(s.cl.Tokens().Refreshes()), "token refresh", "token refreshes"))
	return nil
}

// The demo's corrected re-export: Lars Nielsen's sick day ends at 16:30,
// not 16:00; every other row is as before.
const (
	demoRowBefore = "Sick,,No,2026-11-04,08:00:00,2026-11-04,16:00:00,08:00:00,"
	demoRowAfter  = "Sick,,No,2026-11-04,08:00:00,2026-11-04,16:30:00,08:30:00,"
)

// demoCorrection puts the export back into payroll (a replay of the
// reverted batch), imports a re-export with one row changed, and shows the
// correction: one pay part replaced, the others untouched.
func demoCorrection(ctx context.Context, s *session, sb *sandbox.Server, rules *mapping.Rules, dir string, step func(int, string), io stdio) error {
	w := io.out
	step(7, "replay it: payroll holds the export again (paysync replay 1 --yes)")
	d, err := demoOperation(ctx, s, rules, worker.Operation{Replay: true, Target: ledger.Target{Batches: []int64{1}}}, io)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "replayed: %d pay parts created\n", d.Stats.Created)

	step(8, "a corrected re-export: Lars Nielsen's sick day 8:00 → 8:30, the other rows as before (paysync import toggl-corrected.csv)")
	b, err := examples.Files.ReadFile("toggl.csv")
	if err != nil {
		return err
	}
	if n := bytes.Count(b, []byte(demoRowBefore)); n != 1 {
		return fmt.Errorf("demo: the example export has %d rows to correct, want 1", n)
	}
	corrected := filepath.Join(dir, "toggl-corrected.csv")
	if err := os.WriteFile(corrected, bytes.Replace(b, []byte(demoRowBefore), []byte(demoRowAfter), 1), 0o600); err != nil {
		return err
	}
	held := func() map[string]bool {
		m := map[string]bool{}
		for _, p := range sb.State().Companies[0].PayParts {
			m[p.ID] = true
		}
		return m
	}
	before := held()
	if err := sendImport(ctx, s, rules, []string{corrected}, mapping.ReadOptions{}, importScope{}, false, io); err != nil {
		return err
	}
	after := held()

	step(9, "what the correction did (paysync corrections --import 2)")
	us, err := s.led.ListCorrections(ctx, ledger.CorrectionFilter{SourceID: 2})
	if err != nil {
		return err
	}
	if len(us) != 1 {
		return fmt.Errorf("demo: %d plans of import 2, want 1", len(us))
	}
	detail, err := s.led.CorrectionDetail(ctx, us[0].ID)
	if err != nil {
		return err
	}
	if err := writeCorrection(w, detail); err != nil {
		return err
	}
	kept := 0
	for id := range before {
		if after[id] {
			kept++
		}
	}
	fmt.Fprintf(w, "\npayroll holds %d pay parts: %d untouched (same payroll ids), %d replaced\n", len(after), kept, len(before)-kept)
	if kept != len(before)-1 || len(after) != len(before) {
		return fmt.Errorf("demo: the correction replaced %d of %d pay parts, want 1", len(before)-kept, len(before))
	}
	return nil
}

// demoOperation runs a revert or a replay as paysync revert/replay --yes do.
func demoOperation(ctx context.Context, s *session, rules *mapping.Rules, op worker.Operation, io stdio) (*worker.Deliverer, error) {
	d := s.deliverer(io)
	r, err := worker.NewReconciler(ctx, s.commandWaiter(io.err), s.cl, s.led, rules, s.cfg.CompanyID, s.cfg.BatchSize)
	if err != nil {
		return nil, err
	}
	ops := &worker.Operations{L: s.led, R: r, D: d}
	_, _, err = ops.Run(ctx, op)
	return d, err
}
