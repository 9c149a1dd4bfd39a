package loadtest

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestRun is a small run of every scenario through the real binary: the
// numbers are not judged here (BENCHMARKS.md is), only that the tool
// measures what it says: every pay part created exactly once (every
// entry once in the aggregates), full batches on the happy path, latencies traced through the ledger, the
// trickle within its bound plus slack for a loaded CI machine.
func TestRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs paysync")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "paysync")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/paysync/paysync/cmd/paysync").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	// A linger longer than the run: every batch is sealed by size, 500
	// entries per company in batches of 50, however slow the machine.
	rep, err := Run(t.Context(), Config{Paysync: bin, WorkDir: filepath.Join(dir, "a"), Entries: 2000, Companies: 4, Batch: 50,
		Linger: time.Minute, CSVLines: 3000, NoAggregate: true})
	if err != nil {
		t.Fatal(err)
	}
	// Aggregated (the default rules): the same 2000 entries end as 16 pay
	// parts, merged as they arrive; 20 single entries, the last 4 joining
	// a group seen before.
	rep2, err := Run(t.Context(), Config{Paysync: bin, WorkDir: filepath.Join(dir, "b"), Entries: 2000, Companies: 4, Linger: 100 * time.Millisecond, Trickle: 20})
	if err != nil {
		t.Fatal(err)
	}
	rep.Results = append(rep.Results, rep2.Results...)
	if len(rep.Results) != 4 {
		t.Fatalf("%d results, want nats, csv, nats aggregated and trickle", len(rep.Results))
	}
	nats, csv, merged, trickle := rep.Results[0], rep.Results[1], rep.Results[2], rep.Results[3]
	for _, r := range rep.Results {
		t.Logf("%s: %d entries, %d pay parts in %.2fs (%.0f/s); create calls/pp %.4f, API calls/pp %.4f; p50 %.1fms p99 %.1fms; RSS %.1f MiB, CPU %.2fs",
			r.Scenario, r.Entries, r.PayParts, r.Seconds, r.PayPartsPerSec, r.CreateCallsPerPayPart, r.APICallsPerPayPart, r.LatencyP50Ms, r.LatencyP99Ms, r.PeakRSSMiB, r.CPUSeconds)
		if r.PeakRSSMiB <= 0 || r.CPUSeconds <= 0 || r.Seconds <= 0 {
			t.Errorf("%s: rusage or time missing: %+v", r.Scenario, r)
		}
	}
	// Full batches: create calls per pay part is 1/batch size exactly.
	if nats.Scenario != "nats" || nats.PayParts != 2000 || nats.CreateCalls != 2000/50 || nats.CreateCallsPerPayPart != 1.0/50 {
		t.Errorf("nats: %d create calls for 2000 pay parts in batches of 50 (%+v)", nats.CreateCalls, nats)
	}
	if nats.LatencyP50Ms <= 0 || nats.LatencyP99Ms < nats.LatencyP50Ms {
		t.Errorf("nats latency p50 %.1f p99 %.1f", nats.LatencyP50Ms, nats.LatencyP99Ms)
	}
	// 3000 lines over 4 companies × 4 employees, one code: 16 pay parts.
	if csv.Scenario != "csv" || csv.Entries != 3000 || csv.PayParts != 16 || csv.CreateCalls != 4 {
		t.Errorf("csv: %+v", csv)
	}
	if merged.Scenario != "nats" || merged.Entries != 2000 || merged.PayParts != 16 || merged.LatencyP50Ms <= 0 {
		t.Errorf("nats aggregated: %+v", merged)
	}
	if trickle.Scenario != "trickle" || trickle.PayParts != 16 || trickle.CreateCalls != 20 || trickle.CallsByOp["delete_pay_parts"] != 4 {
		t.Errorf("trickle: %+v", trickle)
	}
	if trickle.LatencyMaxMs < trickle.LingerMs || trickle.LatencyMaxMs > trickle.BoundMs+500 {
		t.Errorf("trickle: max latency %.1f ms; linger %.0f ms, bound %.1f ms", trickle.LatencyMaxMs, trickle.LingerMs, trickle.BoundMs)
	}
}
