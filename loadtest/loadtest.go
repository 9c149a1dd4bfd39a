// Package loadtest measures paysync end to end on one machine, offline: it
// starts an embedded NATS JetStream server and the payroll sandbox in this
// process, runs the real paysync binary beside them (`paysync run` for
// NATS, `paysync import` for files), feeds it entries, waits until every
// entry has landed (a pay part per entry in the sandbox, or, aggregated,
// every entry's line counting in a group whose total the ledger records as
// created, and the sandbox holding the exact total of units), and reports throughput (entries/s), API
// calls per pay part, publish → created latency, and paysync's own peak RSS and CPU
// seconds (VmHWM sampled from /proc, and the kernel's rusage). With
// Config.Peer the NATS backlog goes through paysync and then, on a fresh
// server and sandbox, through Benthos (peer.go), and the two are compared.
//
// cmd/paysync-load is its command line; BENCHMARKS.md has the figures.
package loadtest

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/paysync/paysync"
	"github.com/paysync/paysync/internal/natstest"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/shopspring/decimal"

	_ "modernc.org/sqlite" // reading the ledger after a run
)

// Config is one load run.
type Config struct {
	Paysync   string        // the paysync binary
	WorkDir   string        // ledger, NATS store, CSV file (a temporary directory if empty)
	Entries   int           // NATS entries to publish (0: skip the NATS run)
	Companies int           // companies the entries are spread over
	Batch     int           // PAYSYNC_BATCH_SIZE
	InFlight  int           // PAYSYNC_IN_FLIGHT
	Linger    time.Duration // PAYSYNC_BATCH_LINGER
	Latency   time.Duration // added to every create_pay_parts call by the sandbox
	RateLimit float64       // PAYSYNC_RATE_LIMIT (calls/s)
	// Backlog publishes every entry before paysync starts (a consumer
	// lagging behind), instead of while it runs.
	Backlog  bool
	CSVLines int // lines of the CSV import run (0: skip)
	Trickle  int // single entries published one at a time (0: skip)
	// Profile, when set, is a file for a CPU profile of paysync taken over
	// the first ProfileFor of the NATS run (PAYSYNC_PPROF).
	Profile    string
	ProfileFor time.Duration
	Progress   io.Writer // progress lines (nil: none)
	// Env is added to paysync's environment (e.g. GOMAXPROCS, GOGC).
	Env []string
	// NoAggregate runs the NATS scenarios under rules with aggregate:
	// false: one pay part per entry. By default (paysync's default rules)
	// the entries aggregate into one pay part per company × employee ×
	// code × month (16 for 4 companies), kept right as entries arrive, so
	// a run ends when every entry has landed (in the ledger: in a created
	// pay part) and payroll holds each group's exact total.
	NoAggregate bool
	// Peer runs the NATS backlog of Entries twice, one side after the
	// other, each on a fresh NATS server and sandbox with the same
	// entries: paysync, then Benthos (see peer.go). It replaces the plain
	// NATS run.
	Peer bool
	// Benthos is the peer's binary and BenthosConfig the benthos.yaml the
	// run's copy is generated from (both required with Peer; see
	// BuildBenthos).
	Benthos, BenthosConfig string

	units bool // entries carry explicit "units" (the peer's mapping reads units, not hours)
}

func (c *Config) defaults() {
	if c.Companies <= 0 {
		c.Companies = 4
	}
	if c.Batch <= 0 {
		c.Batch = 100
	}
	if c.InFlight <= 0 {
		c.InFlight = 4
	}
	if c.Linger <= 0 {
		c.Linger = 200 * time.Millisecond
	}
	if c.RateLimit <= 0 {
		c.RateLimit = 100000
	}
	if c.ProfileFor <= 0 {
		c.ProfileFor = 10 * time.Second
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
}

// Result is what one scenario measured.
type Result struct {
	Scenario       string         `json:"scenario"` // nats, nats-backlog, csv, trickle
	Entries        int            `json:"entries"`
	PayParts       int            `json:"pay_parts"`
	Seconds        float64        `json:"seconds"` // first publish (or start) → last pay part created
	EntriesPerSec  float64        `json:"entries_per_sec"`
	PayPartsPerSec float64        `json:"pay_parts_per_sec"`
	CreateCalls    int            `json:"create_calls"`
	APICalls       int            `json:"api_calls"` // every GraphQL request, start-up reads included
	CallsByOp      map[string]int `json:"calls_by_op"`
	// CreateCallsPerPayPart is 1/batch size when every batch is full.
	CreateCallsPerPayPart float64 `json:"create_calls_per_pay_part"`
	APICallsPerPayPart    float64 `json:"api_calls_per_pay_part"`
	LatencyP50Ms          float64 `json:"latency_p50_ms,omitempty"` // publish → created
	LatencyP99Ms          float64 `json:"latency_p99_ms,omitempty"`
	LatencyMaxMs          float64 `json:"latency_max_ms,omitempty"`
	// BoundMs is what the trickle latency is held to: linger + one API
	// round trip (measured before the run).
	BoundMs        float64 `json:"bound_ms,omitempty"`
	RoundTripMs    float64 `json:"round_trip_ms,omitempty"`
	PublishSeconds float64 `json:"publish_seconds,omitempty"`
	PeakRSSMiB     float64 `json:"peak_rss_mib"` // paysync's VmHWM (sampled every 20 ms)
	CPUSeconds     float64 `json:"cpu_seconds"`  // paysync's user + system
	CPUPerSec      float64 `json:"cpu_per_sec"`  // cores paysync kept busy
	// HarnessCPUSeconds is this process's CPU over the scenario: NATS,
	// the sandbox and the publisher, which share the machine with paysync.
	HarnessCPUSeconds float64 `json:"harness_cpu_seconds"`
	// Over the measured interval only (Seconds): the harness's CPU, and
	// the busy CPU of the whole machine (/proc/stat: every process, other
	// jobs on the machine included).
	RunHarnessCPUSeconds float64 `json:"run_harness_cpu_seconds"`
	MachineCPUSeconds    float64 `json:"machine_cpu_seconds"`
	// CPUMicrosPerPayPart is CPUSeconds per pay part, in µs.
	CPUMicrosPerPayPart float64 `json:"cpu_us_per_pay_part"`
	// CPUMicrosPerEntry is CPUSeconds per entry, in µs (the same as per
	// pay part with one pay part per entry).
	CPUMicrosPerEntry float64 `json:"cpu_us_per_entry"`
	// ExtraPayParts were created beyond one per entry (the peer has no
	// exactly-once; for paysync any is a failed run).
	ExtraPayParts int `json:"extra_pay_parts,omitempty"`
	// Ceiling is the throughput the added latency allows (in flight ×
	// batch / latency), when there is added latency.
	Ceiling  float64 `json:"ceiling_pay_parts_per_sec,omitempty"`
	Batch    int     `json:"batch"`
	InFlight int     `json:"in_flight"`
	LingerMs float64 `json:"linger_ms"`
	AddedMs  float64 `json:"added_latency_ms"`
}

// Report is a whole run.
type Report struct {
	Version   string    `json:"version"`
	GoMaxProc int       `json:"gomaxprocs"`
	CPUs      int       `json:"cpus"`
	At        time.Time `json:"at"`
	Results   []Result  `json:"results"`
	// Peer compares paysync with Benthos when the run had Config.Peer.
	Peer *Comparison `json:"peer,omitempty"`
}

// Run runs the scenarios cfg asks for.
func Run(ctx context.Context, cfg Config) (Report, error) {
	cfg.defaults()
	rep := Report{Version: paysync.Version(), At: time.Now().UTC()}
	if cfg.Paysync == "" {
		return rep, errors.New("loadtest: the paysync binary is required")
	}
	if cfg.WorkDir == "" {
		dir, err := os.MkdirTemp("", "paysync-load-")
		if err != nil {
			return rep, err
		}
		defer os.RemoveAll(dir)
		cfg.WorkDir = dir
	}
	if cfg.Entries > 0 && cfg.Peer {
		rs, cmp, err := runPeer(ctx, cfg)
		if err != nil {
			return rep, fmt.Errorf("peer: %w", err)
		}
		rep.Results = append(rep.Results, rs...)
		rep.Peer = &cmp
	} else if cfg.Entries > 0 {
		cpu0 := selfCPU()
		name := "nats"
		if cfg.Backlog {
			name = "nats-backlog"
		}
		r, err := runNATS(ctx, cfg, name, cfg.Entries, cfg.Backlog)
		if err != nil {
			return rep, fmt.Errorf("%s: %w", name, err)
		}
		r.HarnessCPUSeconds = selfCPU() - cpu0
		rep.Results = append(rep.Results, r)
	}
	if cfg.CSVLines > 0 {
		cpu0 := selfCPU()
		r, err := runCSV(ctx, cfg)
		if err != nil {
			return rep, fmt.Errorf("csv: %w", err)
		}
		r.HarnessCPUSeconds = selfCPU() - cpu0
		rep.Results = append(rep.Results, r)
	}
	if cfg.Trickle > 0 {
		cpu0 := selfCPU()
		r, err := runTrickle(ctx, cfg)
		if err != nil {
			return rep, fmt.Errorf("trickle: %w", err)
		}
		r.HarnessCPUSeconds = selfCPU() - cpu0
		rep.Results = append(rep.Results, r)
	}
	return rep, nil
}

// env is one scenario's sandbox, directory and paysync environment.
type env struct {
	cfg     Config
	dir     string
	sb      *sandbox.Server
	base    []string
	mu      sync.Mutex
	made    map[string]int64 // payroll id → created (unix ns), when timing
	creates atomic.Int64     // pay parts created so far (OnCreate)
	seeded  int              // pay parts in the sandbox that are not paysync's (the trickle's round trips)
	// seededUnits are the units of those pay parts.
	seededUnits decimal.Decimal
	// before holds the sandbox's request counters before paysync started
	// (the load tool's own probes), subtracted by fill.
	before map[string]int
}

func newEnv(cfg Config, name string, timing bool) (*env, error) {
	dir := filepath.Join(cfg.WorkDir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	e := &env{cfg: cfg, dir: dir}
	if timing {
		e.made = map[string]int64{}
	}
	opts := sandbox.Options{ExtraCompanies: cfg.Companies, AccessTTL: time.Hour,
		OnCreate: func(_ string, created []paysync.PayPart) {
			e.creates.Add(int64(len(created)))
			now := time.Now().UnixNano()
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.made != nil {
				for _, p := range created {
					e.made[p.ID] = now
				}
			}
		}}
	if cfg.Latency > 0 {
		opts.Faults = []sandbox.Fault{{Kind: sandbox.FaultLatency, Op: "create_pay_parts", Delay: cfg.Latency}}
	}
	e.sb = sandbox.New(opts)
	url, err := e.sb.Start("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	o := e.sb.Options()
	e.base = append(os.Environ(),
		"PAYSYNC_PAYROLL_URL="+url, "PAYSYNC_AUTH_URL="+url, "PAYSYNC_AUTH_REALM="+o.Realm,
		"PAYSYNC_CLIENT_ID="+o.ClientID, "PAYSYNC_CLIENT_SECRET="+o.ClientSecret,
		"PAYSYNC_REFRESH_TOKEN="+e.sb.IssueRefreshToken(),
		"PAYSYNC_LEDGER="+filepath.Join(dir, "ledger.db"),
		"PAYSYNC_COMPANY_ID="+sandbox.LoadCompanyID(1),
		"PAYSYNC_BATCH_SIZE="+strconv.Itoa(cfg.Batch),
		"PAYSYNC_BATCH_LINGER="+cfg.Linger.String(),
		"PAYSYNC_IN_FLIGHT="+strconv.Itoa(cfg.InFlight),
		"PAYSYNC_RATE_LIMIT="+strconv.FormatFloat(cfg.RateLimit, 'f', -1, 64),
		"PAYSYNC_LOG_LEVEL=warn",
	)
	e.base = append(e.base, cfg.Env...)
	return e, nil
}

func (e *env) close() { _ = e.sb.Close(context.Background()) }

// fill copies the sandbox's call counters into r.
func (e *env) fill(r *Result) {
	st := e.sb.State()
	r.CallsByOp = st.Counters.Requests
	for op, n := range e.before {
		r.CallsByOp[op] -= n
		if r.CallsByOp[op] == 0 {
			delete(r.CallsByOp, op)
		}
	}
	for _, n := range r.CallsByOp {
		r.APICalls += n
	}
	r.CreateCalls = r.CallsByOp["create_pay_parts"]
	r.derive()
	r.Batch, r.InFlight = e.cfg.Batch, e.cfg.InFlight
	r.LingerMs, r.AddedMs = ms(e.cfg.Linger), ms(e.cfg.Latency)
	if e.cfg.Latency > 0 {
		r.Ceiling = float64(e.cfg.InFlight*e.cfg.Batch) / e.cfg.Latency.Seconds()
	}
}

// derive computes the per-second and per-pay-part figures from the counts.
func (r *Result) derive() {
	if r.PayParts > 0 {
		r.CreateCallsPerPayPart = float64(r.CreateCalls) / float64(r.PayParts)
		r.APICallsPerPayPart = float64(r.APICalls) / float64(r.PayParts)
		r.CPUMicrosPerPayPart = 1e6 * r.CPUSeconds / float64(r.PayParts)
	}
	if r.Entries > 0 {
		r.CPUMicrosPerEntry = 1e6 * r.CPUSeconds / float64(r.Entries)
	}
	if r.Seconds > 0 {
		r.EntriesPerSec = float64(r.Entries) / r.Seconds
		r.PayPartsPerSec = float64(r.PayParts) / r.Seconds
		r.CPUPerSec = r.CPUSeconds / r.Seconds
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// landedSQL counts the entries that have landed, through the desired
// state (pay parts have no entry links of their own: a pay part has its
// group, and an entry reaches its groups through its versions' lines).
// An entry has landed when its line counts (groups.lines is the number of
// lines counting in the group, kept by the ledger's recount) in a group
// whose total payroll holds: a created pay part of the group that is not
// superseded, none pending (a plan recorded and not yet sent), and the
// group not dirty (no change since its last plan). Without the last two,
// a line added to a group whose earlier total was created would count as
// landed before its new total is sent. Every entry of the load tool has
// one line, so lines are entries.
const landedSQL = `SELECT coalesce(sum(g.lines), 0) FROM groups g WHERE g.dirty = 0
	AND EXISTS (SELECT 1 FROM pay_parts p WHERE p.group_id = g.id AND p.state = 'created' AND p.superseded_by IS NULL)
	AND NOT EXISTS (SELECT 1 FROM pay_parts p JOIN batches b ON b.id = p.batch_id WHERE p.group_id = g.id
		AND p.state = 'pending' AND p.superseded_by IS NULL AND b.state IN ('pending', 'sending', 'failed'))`

// waitLanded polls until n entries have landed (landedSQL), the sandbox
// holds parts pay parts (0: any number) and exactly units in all (every
// entry's units once: payroll holds the exact totals), the process exits,
// or ctx ends. The ledger is read every 50 ms while pay parts are
// created, else every 250 ms. It is stuck when neither the entries landed
// nor the sandbox's creates moved for 2 minutes (aggregated, groups stay
// dirty while a backlog drains, so landed alone may not move for long).
func (e *env) waitLanded(ctx context.Context, n, parts int, units decimal.Decimal, exited <-chan struct{}) error {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.dir, "ledger.db")+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer db.Close()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	landed, lastAt, readAt := -1, time.Now(), time.Time{}
	var seen int64 = -1
	for {
		// The ledger records a create just after the sandbox made it: read
		// again a while after the last create too.
		c, since := e.creates.Load(), time.Since(readAt)
		if (c != seen && since >= 50*time.Millisecond) || since >= 250*time.Millisecond {
			if c != seen {
				lastAt = time.Now()
			}
			seen, readAt = c, time.Now()
			var got int
			if err := db.QueryRowContext(ctx, landedSQL).Scan(&got); err != nil {
				return fmt.Errorf("read the ledger: %w", err)
			}
			if got != landed {
				landed, lastAt = got, time.Now()
			}
		}
		pp := e.sb.PayPartCount() - e.seeded
		if parts > 0 && pp > parts {
			return fmt.Errorf("the sandbox holds %d pay parts, want %d: something was created twice", pp, parts)
		}
		if landed >= n && (parts == 0 || pp == parts) && e.checkUnits(units) == nil {
			return nil
		}
		if time.Since(lastAt) > 2*time.Minute {
			return fmt.Errorf("stuck at %d of %d entries landed (%d of %d pay parts; %v) for 2 minutes", landed, n, pp, parts, e.checkUnits(units))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return fmt.Errorf("the process exited with %d of %d entries landed", landed, n)
		case <-t.C:
		}
	}
}

// waitFor polls until the sandbox holds want pay parts, the process exits,
// or ctx ends.
func (e *env) waitFor(ctx context.Context, want int, exited <-chan struct{}) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	last, lastAt := -1, time.Now()
	for {
		n := e.sb.PayPartCount()
		if n >= want {
			if n > want {
				return fmt.Errorf("the sandbox holds %d pay parts, want %d: something was created twice", n, want)
			}
			return nil
		}
		if n != last {
			last, lastAt = n, time.Now()
		} else if time.Since(lastAt) > 2*time.Minute {
			return fmt.Errorf("stuck at %d of %d pay parts for 2 minutes", n, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return fmt.Errorf("the process exited with %d of %d pay parts created", n, want)
		case <-t.C:
		}
	}
}

// proc is a running paysync (or the peer).
type proc struct {
	name   string // for errors: paysync, benthos
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
	out    strings.Builder
	mu     sync.Mutex
	hwm    atomic.Int64 // KiB: the largest VmHWM read from /proc
}

func (e *env) start(args []string, extra ...string) (*proc, error) {
	return startProc("paysync", e.cfg.Paysync, args, append(slices.Clone(e.base), extra...))
}

// startProc starts bin with exactly env, watching its peak RSS.
func startProc(name, bin string, args, env []string) (*proc, error) {
	p := &proc{name: name, cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.Env = env
	p.cmd.Stdout = &lockedWriter{p: p}
	p.cmd.Stderr = &lockedWriter{p: p}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go p.watch()
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	return p, nil
}

// watch reads the process's VmHWM every 20 ms until it exits. The kernel's
// rusage cannot be used for peak RSS here: a child started by vfork+exec
// reports the parent's high-water mark when that is higher (and the load
// tool holds NATS and the sandbox).
func (p *proc) watch() {
	file := fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if kib, ok := readHWM(file); ok && kib > p.hwm.Load() {
			p.hwm.Store(kib)
		}
		select {
		case <-p.exited:
			return
		case <-t.C:
		}
	}
}

func readHWM(file string) (int64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

type lockedWriter struct{ p *proc }

func (w *lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	if w.p.out.Len() < 64<<10 {
		w.p.out.Write(b)
	}
	return len(b), nil
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.TrimSpace(p.out.String())
}

// stop sends SIGTERM and waits; rusage is then read into r.
func (p *proc) stop(r *Result) error {
	select {
	case <-p.exited:
	default:
		if kib, ok := readHWM(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid)); ok && kib > p.hwm.Load() {
			p.hwm.Store(kib)
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(time.Minute):
			_ = p.cmd.Process.Kill()
			<-p.exited
			return fmt.Errorf("%s did not stop within a minute of SIGTERM", p.name)
		}
	}
	p.usage(r)
	if p.err != nil {
		return fmt.Errorf("%s: %v: %s", p.name, p.err, p.output())
	}
	return nil
}

func (p *proc) usage(r *Result) {
	r.PeakRSSMiB = float64(p.hwm.Load()) / 1024
	if ru, ok := p.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.CPUSeconds = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
}

// natsServer starts an embedded JetStream server storing in dir.
func natsServer(dir string) (*server.Server, error) {
	return natstest.Run(natstest.WithStoreDir(dir), natstest.WithOptions(func(o *server.Options) {
		o.JetStreamMaxMemory, o.JetStreamMaxStore = 64<<20, 8<<30
	}))
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitReady polls paysync's /readyz.
func waitReady(ctx context.Context, addr string, p *proc) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("paysync exited: %v: %s", p.err, p.output())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("paysync not ready after 30s: %s", p.output())
}

// latencies joins publish times (by entry index) and creation times (by
// payroll id) through the ledger, and returns the sorted latencies, one
// per entry traced: publish → the first pay part created that holds it.
//
// Pay parts are tied to groups, not to entries: an entry reaches a group
// through its versions' lines (lines.version → versions.entry, counting
// lines only), and each pay part planned for a group holds the group's
// total at the time it was planned. The load tool only adds entries, so a
// group's lines are absorbed in version order and its pay parts hold
// growing totals: the first k lines, for some k. A line is in a pay part
// when the pay part's units reach the group's units up to and including
// that line (lines in version order; units, or hours from seconds, to
// hundredths as payroll holds them). The entry landed when the first pay
// part of its group that holds its line was created (with more than one
// line, the latest over its lines). With one pay part per entry
// (aggregate: false) that is its own pay part. An entry of whose lines
// one is in no created pay part is not traced.
func (e *env) latencies(ctx context.Context, published []int64, prefix string) ([]time.Duration, error) {
	db, err := sql.Open("sqlite", "file:"+filepath.Join(e.dir, "ledger.db")+"?mode=ro")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	made, err := e.madeByGroup(ctx, db)
	if err != nil {
		return nil, err
	}
	rows, err := db.QueryContext(ctx, `SELECT l.group_id, l.units, l.seconds, e.entry_id FROM lines l
		JOIN versions v ON v.id = l.version JOIN entries e ON e.id = v.entry
		WHERE l.counts = 1 ORDER BY l.group_id, l.version, l.seq`)
	if err != nil {
		return nil, fmt.Errorf("read the ledger: %w", err)
	}
	defer rows.Close()
	landed := map[int]int64{}
	missed := map[int]bool{} // a line of it in no created pay part
	var group int64 = -1
	var cum decimal.Decimal
	var parts []madePart // the group's created pay parts, in order of creation
	j := 0               // parts[:j] do not hold the group's lines so far
	hour := decimal.New(3600, 0)
	for rows.Next() {
		var g int64
		var units, seconds sql.NullString
		var eid string
		if err := rows.Scan(&g, &units, &seconds, &eid); err != nil {
			return nil, err
		}
		if g != group {
			group, cum, parts, j = g, decimal.Zero, made[g], 0
		}
		switch {
		case units.Valid:
			q, _ := decimal.NewFromString(units.String)
			cum = cum.Add(q)
		case seconds.Valid:
			q, _ := decimal.NewFromString(seconds.String)
			cum = cum.Add(q.Div(hour))
		}
		want := cum.Round(2)
		for j < len(parts) && parts[j].units.LessThan(want) {
			j++
		}
		i, err := strconv.Atoi(strings.TrimPrefix(eid, prefix))
		if err != nil || !strings.HasPrefix(eid, prefix) || i < 0 || i >= len(published) || published[i] == 0 {
			continue
		}
		if j == len(parts) {
			missed[i] = true
			continue
		}
		if at, ok := landed[i]; !ok || parts[j].at > at {
			landed[i] = parts[j].at
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := make([]time.Duration, 0, len(landed))
	for i, at := range landed {
		if !missed[i] {
			out = append(out, time.Duration(at-published[i]))
		}
	}
	slices.Sort(out)
	return out, nil
}

// madePart is a pay part the sandbox created: when, and its units.
type madePart struct {
	at    int64 // unix ns
	units decimal.Decimal
}

// madeByGroup reads the ledger's pay parts that payroll created (they have
// a payroll id, superseded since or not) and returns each group's, in the
// order the sandbox created them.
func (e *env) madeByGroup(ctx context.Context, db *sql.DB) (map[int64][]madePart, error) {
	rows, err := db.QueryContext(ctx, `SELECT group_id, payroll_id, coalesce(units, '0') FROM pay_parts
		WHERE payroll_id IS NOT NULL AND group_id IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("read the ledger: %w", err)
	}
	defer rows.Close()
	e.mu.Lock()
	defer e.mu.Unlock()
	made := map[int64][]madePart{}
	for rows.Next() {
		var group int64
		var pid, units string
		if err := rows.Scan(&group, &pid, &units); err != nil {
			return nil, err
		}
		if at, ok := e.made[pid]; ok {
			u, err := decimal.NewFromString(units)
			if err != nil {
				return nil, fmt.Errorf("pay part %s: units %q: %w", pid, units, err)
			}
			made[group] = append(made[group], madePart{at: at, units: u})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, ps := range made {
		slices.SortFunc(ps, func(a, b madePart) int { return cmp.Compare(a.at, b.at) })
	}
	return made, nil
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted)-1) + 0.5)
	return sorted[min(i, len(sorted)-1)]
}

func (r *Result) setLatency(l []time.Duration) {
	if len(l) == 0 {
		return
	}
	r.LatencyP50Ms = ms(quantile(l, 0.50))
	r.LatencyP99Ms = ms(quantile(l, 0.99))
	r.LatencyMaxMs = ms(l[len(l)-1])
}

// window holds the CPU counters at the start of a measured interval.
type window struct{ self, machine float64 }

func startWindow() window { return window{selfCPU(), machineCPU()} }

// end records the harness's and the machine's CPU over the interval.
func (w window) end(r *Result) {
	r.RunHarnessCPUSeconds = selfCPU() - w.self
	r.MachineCPUSeconds = machineCPU() - w.machine
}

// machineCPU is the busy CPU seconds of all CPUs since boot, from the
// first line of /proc/stat (user nice system idle iowait irq softirq
// steal, in USER_HZ, 100 on Linux); 0 where there is none.
func machineCPU() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var busy float64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseFloat(v, 64)
		busy += n
	}
	return busy / 100
}

// selfCPU is this process's user + system CPU seconds so far.
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
