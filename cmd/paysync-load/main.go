// Command paysync-load measures paysync end to end on one machine, offline
// (package loadtest): NATS → paysync run → sandbox → ledger, a CSV import,
// a trickle of single entries, and the same NATS backlog through paysync
// and through its peer, Benthos (--peer). See BENCHMARKS.md.
//
//	go run ./cmd/paysync-load --entries 100000 --companies 4 --batch 100
//	go run ./cmd/paysync-load --entries 100000 --backlog --no-aggregate
//	go run ./cmd/paysync-load --entries 100000 --latency 100ms --in-flight 4
//	go run ./cmd/paysync-load --entries 1000000 --backlog
//	go run ./cmd/paysync-load --entries 0 --csv 1000000
//	go run ./cmd/paysync-load --entries 0 --trickle 20 --linger 200ms
//	go run ./cmd/paysync-load --peer --entries 100000 [--latency 100ms]
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
	var benthosSrc string
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
	fs.BoolVar(&cfg.NoAggregate, "no-aggregate", false, "NATS runs under rules with aggregate: false (one pay part per entry; default: aggregated per company × employee × code × month)")
	fs.IntVar(&cfg.CSVLines, "csv", 0, "lines of a CSV file to import with paysync import (0: skip)")
	fs.IntVar(&cfg.Trickle, "trickle", 0, "single entries to publish one at a time (0: skip)")
	fs.StringVar(&cfg.Profile, "cpuprofile", "", "write a CPU profile of paysync during the NATS run to this file (an execution trace if it ends in .trace)")
	fs.DurationVar(&cfg.ProfileFor, "profile-for", 0, "length of the CPU profile (default 10s)")
	fs.BoolVar(&cfg.Peer, "peer", false, "run the NATS backlog through paysync (aggregated, or one pay part per entry with --no-aggregate), then the same backlog through Benthos, and compare per entry")
	fs.StringVar(&cfg.Benthos, "benthos", "", "Benthos binary for --peer (default: built from --benthos-src into the user cache directory)")
	fs.StringVar(&benthosSrc, "benthos-src", "", "the trimmed Benthos build and its benthos.yaml (default: ../shared/bench/benthos beside this module)")
	fs.StringVar(&cfg.BenthosConfig, "benthos-config", "", "benthos.yaml the run's copy is generated from (default: benthos.yaml in --benthos-src)")
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
	if cfg.Peer && cfg.Entries > 0 {
		if err := peerFiles(ctx, &cfg, benthosSrc, stderr); err != nil {
			return err
		}
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
	fmt.Fprintln(w, "scenario\tentries\tpay parts\tseconds\tentries/s\tpay parts/s\tcreate calls/pp\tAPI calls/pp\tp50 ms\tp99 ms\tpeak RSS MiB\tCPU s\tCPU µs/pp\tCPU µs/entry\t")
	for _, r := range rep.Results {
		fmt.Fprintf(w, "%s\t%d\t%d\t%.2f\t%.0f\t%.0f\t%.4f\t%.4f\t%.1f\t%.1f\t%.1f\t%.2f\t%.1f\t%.1f\t\n", r.Scenario, r.Entries, r.PayParts, r.Seconds,
			r.EntriesPerSec, r.PayPartsPerSec, r.CreateCallsPerPayPart, r.APICallsPerPayPart, r.LatencyP50Ms, r.LatencyP99Ms, r.PeakRSSMiB, r.CPUSeconds,
			r.CPUMicrosPerPayPart, r.CPUMicrosPerEntry)
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
		if r.ExtraPayParts != 0 {
			fmt.Fprintf(stdout, "%s: %d pay parts created beyond one per entry\n", r.Scenario, r.ExtraPayParts)
		}
		fmt.Fprintf(stdout, "%s: calls %s\n", r.Scenario, calls(r.CallsByOp))
		if r.MachineCPUSeconds > 0 && r.Seconds > 0 {
			// What shared the cores while it ran (the child's CPU includes its start-up and stop).
			fmt.Fprintf(stdout, "%s: cores busy over the %.2f s: %.2f in all = %.2f the process + %.2f the harness (NATS, sandbox) + %.2f everything else; harness CPU over the scenario %.2f s\n",
				r.Scenario, r.Seconds, r.MachineCPUSeconds/r.Seconds, r.CPUPerSec, r.RunHarnessCPUSeconds/r.Seconds,
				max(0, r.MachineCPUSeconds-r.CPUSeconds-r.RunHarnessCPUSeconds)/r.Seconds, r.HarnessCPUSeconds)
		}
	}
	if c := rep.Peer; c != nil {
		rules := "aggregated"
		if !c.Aggregated {
			rules = "one pay part per entry"
		}
		fmt.Fprintf(stdout, "peer (paysync %s): paysync %.0f entries/s, Benthos %.0f/s: ratio %.2f; CPU per entry %.1f µs vs %.1f µs (%.1f×)\n",
			rules, c.PaysyncPerSec, c.BenthosPerSec, c.Ratio, c.PaysyncCPUMicros, c.BenthosCPUMicros, c.CPURatio)
	}
	return nil
}

// peerFiles fills in the Benthos binary (built on first use) and the
// benthos.yaml template for --peer.
func peerFiles(ctx context.Context, cfg *loadtest.Config, src string, stderr io.Writer) error {
	if src == "" && (cfg.Benthos == "" || cfg.BenthosConfig == "") {
		out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
		mod := strings.TrimSpace(string(out))
		if err != nil || mod == "" || mod == os.DevNull {
			return fmt.Errorf("--peer: cannot find this module (go env GOMOD: %v); give --benthos-src", err)
		}
		src = filepath.Join(filepath.Dir(mod), "..", "shared", "bench", "benthos")
	}
	if cfg.BenthosConfig == "" {
		cfg.BenthosConfig = filepath.Join(src, "benthos.yaml")
	}
	if cfg.Benthos == "" {
		bin, err := loadtest.BuildBenthos(ctx, src, stderr)
		if err != nil {
			return fmt.Errorf("--peer: %w", err)
		}
		cfg.Benthos = bin
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
