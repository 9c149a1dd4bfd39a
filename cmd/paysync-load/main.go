// Command paysync-load measures paysync end to end on one machine, offline
// (package loadtest): NATS → paysync run → sandbox → ledger, a CSV import,
// and a trickle of single entries. See BENCHMARKS.md.
//
//	go run ./cmd/paysync-load --entries 100000 --companies 4 --batch 100
//	go run ./cmd/paysync-load --entries 100000 --latency 100ms --in-flight 4
//	go run ./cmd/paysync-load --entries 1000000 --backlog
//	go run ./cmd/paysync-load --entries 0 --csv 1000000
//	go run ./cmd/paysync-load --entries 0 --trickle 20 --linger 200ms
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/paysync/paysync/loadtest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "paysync-load:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg loadtest.Config
	var asJSON, keep bool
	fs := flag.NewFlagSet("paysync-load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.Paysync, "paysync", "", "paysync binary (default: built from this module into the work directory)")
	fs.StringVar(&cfg.WorkDir, "dir", "", "work directory (default: a temporary one, removed afterwards)")
	fs.IntVar(&cfg.Entries, "entries", 100000, "entries to publish through NATS (0: skip)")
	fs.IntVar(&cfg.Companies, "companies", 4, "companies the entries are spread over")
	fs.IntVar(&cfg.Batch, "batch", 100, "PAYSYNC_BATCH_SIZE")
	fs.IntVar(&cfg.InFlight, "in-flight", 4, "PAYSYNC_IN_FLIGHT")
	fs.DurationVar(&cfg.Linger, "linger", 0, "PAYSYNC_BATCH_LINGER (default 200ms)")
	fs.DurationVar(&cfg.Latency, "latency", 0, "latency the sandbox adds to every create_pay_parts")
	fs.Float64Var(&cfg.RateLimit, "rate-limit", 0, "PAYSYNC_RATE_LIMIT in calls/s (default 100000: off)")
	fs.BoolVar(&cfg.Backlog, "backlog", false, "publish every entry before paysync starts")
	fs.IntVar(&cfg.CSVLines, "csv", 0, "lines of a CSV file to import with paysync import (0: skip)")
	fs.IntVar(&cfg.Trickle, "trickle", 0, "single entries to publish one at a time (0: skip)")
	fs.StringVar(&cfg.Profile, "cpuprofile", "", "write a CPU profile of paysync during the NATS run to this file")
	fs.DurationVar(&cfg.ProfileFor, "profile-for", 0, "length of the CPU profile (default 10s)")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fs.BoolVar(&keep, "keep", false, "keep the work directory")
	var env multi
	fs.Var(&env, "env", "KEY=VALUE added to paysync's environment (repeatable), e.g. GOMAXPROCS=1")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.Env = env
	if cfg.WorkDir == "" {
		dir, err := os.MkdirTemp("", "paysync-load-")
		if err != nil {
			return err
		}
		if !keep {
			defer os.RemoveAll(dir)
		} else {
			fmt.Fprintln(stderr, "work directory:", dir)
		}
		cfg.WorkDir = dir
	}
	if cfg.Paysync == "" {
		bin := filepath.Join(cfg.WorkDir, "paysync")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/paysync/paysync/cmd/paysync")
		build.Stdout, build.Stderr = stderr, stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build paysync: %w", err)
		}
		cfg.Paysync = bin
	}
	cfg.Progress = stderr
	rep, err := loadtest.Run(ctx, cfg)
	if err != nil {
		return err
	}
	rep.GoMaxProc, rep.CPUs = runtime.GOMAXPROCS(0), runtime.NumCPU()
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	w := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tentries\tpay parts\tseconds\tentries/s\tpay parts/s\tcreate calls/pp\tAPI calls/pp\tp50 ms\tp99 ms\tpeak RSS MiB\tCPU s\t")
	for _, r := range rep.Results {
		fmt.Fprintf(w, "%s\t%d\t%d\t%.2f\t%.0f\t%.0f\t%.4f\t%.4f\t%.1f\t%.1f\t%.1f\t%.2f\t\n", r.Scenario, r.Entries, r.PayParts, r.Seconds,
			r.EntriesPerSec, r.PayPartsPerSec, r.CreateCallsPerPayPart, r.APICallsPerPayPart, r.LatencyP50Ms, r.LatencyP99Ms, r.PeakRSSMiB, r.CPUSeconds)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, r := range rep.Results {
		if r.Ceiling > 0 {
			fmt.Fprintf(stdout, "%s: %.0f pay parts/s = %.0f%% of the %.0f/s that %.0f ms added latency allows (%d in flight × batch %d)\n",
				r.Scenario, r.PayPartsPerSec, 100*r.PayPartsPerSec/r.Ceiling, r.Ceiling, r.AddedMs, r.InFlight, r.Batch)
		}
		if r.BoundMs > 0 {
			fmt.Fprintf(stdout, "%s: max %.1f ms publish → created; bound linger %.0f ms + round trip %.1f ms = %.1f ms\n",
				r.Scenario, r.LatencyMaxMs, r.LingerMs, r.RoundTripMs, r.BoundMs)
		}
		fmt.Fprintf(stdout, "%s: calls %s\n", r.Scenario, calls(r.CallsByOp))
	}
	return nil
}

func calls(m map[string]int) string {
	var parts []string
	for op, n := range m {
		parts = append(parts, fmt.Sprintf("%s=%d", op, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(v string) error { *m = append(*m, v); return nil }
