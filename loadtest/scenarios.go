package loadtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker/stream"
	"github.com/shopspring/decimal"
)

const streamName = "TIMESHEETS"

// entry returns entry i as a JetStream message body and its subject:
// companies round robin, then employees, a distinct amount of hours each.
func entry(cfg Config, prefix string, i int) (subject string, body []byte) {
	c := i%cfg.Companies + 1
	emp := (i/cfg.Companies)%4 + 1
	company := sandbox.LoadCompanyID(c)
	hours := strconv.Itoa(1+i%8) + "." + strconv.Itoa(25*(i%4))
	if cfg.units {
		// A number, as the peer's mapping passes it to GraphQL's Float unchanged.
		body = fmt.Appendf(nil, `{"id":"%s%d","company_id":"%s","employee_id":"%s","date":"2026-11-%02d","units":%s,"code":"T1"}`,
			prefix, i, company, sandbox.LoadEmployeeID(c, emp), 1+i%28, hours)
	} else {
		body = fmt.Appendf(nil, `{"id":"%s%d","company_id":"%s","employee_id":"%s","date":"2026-11-%02d","hours":"%s","code":"T1"}`,
			prefix, i, company, sandbox.LoadEmployeeID(c, emp), 1+i%28, hours)
	}
	return stream.Subject("timesheets", company, "load"), body
}

// publisher publishes entries asynchronously, recording when each went out.
type publisher struct {
	nc *nats.Conn
	js jetstream.JetStream
}

func newPublisher(ctx context.Context, url string) (*publisher, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		nc.Close()
		return nil, err
	}
	// The stream as paysync would create it (paysync leaves an existing one alone).
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: streamName, Subjects: []string{"timesheets.>"},
		Storage: jetstream.FileStorage, Retention: jetstream.WorkQueuePolicy, Duplicates: 2 * time.Minute}); err != nil {
		nc.Close()
		return nil, fmt.Errorf("create stream: %w", err)
	}
	return &publisher{nc: nc, js: js}, nil
}

func (p *publisher) close() { p.nc.Close() }

// publish sends entries [from, to), writing each one's publish time into
// published (unix ns) when it is not nil.
func (p *publisher) publish(ctx context.Context, cfg Config, prefix string, from, to int, published []int64) error {
	for i := from; i < to; i++ {
		subj, body := entry(cfg, prefix, i)
		if published != nil {
			published[i] = time.Now().UnixNano()
		}
		if _, err := p.js.PublishAsync(subj, body, jetstream.WithMsgID(prefix+strconv.Itoa(i))); err != nil {
			return fmt.Errorf("publish entry %d: %w", i, err)
		}
	}
	select {
	case <-p.js.PublishAsyncComplete():
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5 * time.Minute):
		return fmt.Errorf("publish: %d acks still pending after 5 minutes", p.js.PublishAsyncPending())
	}
	return nil
}

// startNATS starts the scenario's JetStream server and a publisher on it;
// stop shuts both down.
func (e *env) startNATS(ctx context.Context) (url string, pub *publisher, stop func(), err error) {
	ns, err := natsServer(filepath.Join(e.dir, "nats"))
	if err != nil {
		return "", nil, nil, err
	}
	if pub, err = newPublisher(ctx, ns.ClientURL()); err != nil {
		ns.Shutdown()
		return "", nil, nil, err
	}
	return ns.ClientURL(), pub, func() { pub.close(); ns.Shutdown(); ns.WaitForShutdown() }, nil
}

// natsTotals is what payroll must hold once entries [0, n) landed: the
// pay parts (one per entry; aggregated, 0: at least one per company ×
// employee, as every entry is T1 of November, and another beside each
// aggregate that reached the merge cap) and their units in all, exactly.
func natsTotals(cfg Config, n int) (parts int, units decimal.Decimal) {
	for i := range n {
		_, body := entry(cfg, "", i)
		var e struct {
			Hours decimal.Decimal `json:"hours"`
			Units decimal.Decimal `json:"units"`
		}
		if err := json.Unmarshal(body, &e); err != nil {
			panic(err) // entry writes valid JSON
		}
		units = units.Add(e.Hours).Add(e.Units)
	}
	if cfg.NoAggregate {
		return n, units
	}
	return 0, units
}

// checkUnits fails unless the sandbox holds exactly units in all (every
// entry's hours once: none lost, none twice, whatever the aggregates).
// The pay parts the load tool seeded itself (the trickle's round trips)
// are counted out.
func (e *env) checkUnits(units decimal.Decimal) error {
	if sum := e.unitsHeld().Sub(e.seededUnits); !sum.Equal(units) {
		return fmt.Errorf("the sandbox's pay parts sum %s units, want %s", sum, units)
	}
	return nil
}

// unitsHeld is the sum of the units of every pay part the sandbox holds.
func (e *env) unitsHeld() decimal.Decimal {
	sum := decimal.Zero
	for _, c := range e.sb.State().Companies {
		for _, p := range c.PayParts {
			if p.Units.Valid {
				sum = sum.Add(p.Units.Decimal)
			}
		}
	}
	return sum
}

// runNATS: N entries through NATS → paysync run → sandbox → ledger.
func runNATS(ctx context.Context, cfg Config, name string, n int, backlog bool) (Result, error) {
	parts, units := natsTotals(cfg, n)
	r := Result{Scenario: name, Entries: n, PayParts: parts}
	timing := !backlog
	e, err := newEnv(cfg, name, timing)
	if err != nil {
		return r, err
	}
	defer e.close()
	url, pub, stop, err := e.startNATS(ctx)
	if err != nil {
		return r, err
	}
	defer stop()
	const prefix = "load-"
	var published []int64
	if timing {
		published = make([]int64, n)
	}
	if backlog {
		fmt.Fprintf(cfg.Progress, "%s: publishing a backlog of %d entries\n", name, n)
		t0 := time.Now()
		if err := pub.publish(ctx, cfg, prefix, 0, n, nil); err != nil {
			return r, err
		}
		r.PublishSeconds = time.Since(t0).Seconds()
	}
	addr, err := freeAddr()
	if err != nil {
		return r, err
	}
	extra, err := e.runEnv(cfg, url, addr)
	if err != nil {
		return r, err
	}
	if cfg.Profile != "" {
		extra = append(extra, "PAYSYNC_PPROF=true")
	}
	t0, w := time.Now(), startWindow()
	p, err := e.start([]string{"run"}, extra...)
	if err != nil {
		return r, err
	}
	defer p.stop(&Result{})
	if err := waitReady(ctx, addr, p); err != nil {
		return r, err
	}
	fmt.Fprintf(cfg.Progress, "%s: paysync ready after %s\n", name, time.Since(t0).Round(time.Millisecond))
	profDone := make(chan error, 1)
	if cfg.Profile != "" {
		go func() { profDone <- fetchProfile(addr, cfg.Profile, cfg.ProfileFor) }()
	} else {
		profDone <- nil
	}
	pubErr := make(chan error, 1)
	if !backlog {
		t0, w = time.Now(), startWindow()
		go func() {
			err := pub.publish(ctx, cfg, prefix, 0, n, published)
			r.PublishSeconds = time.Since(t0).Seconds()
			pubErr <- err
		}()
	} else {
		pubErr <- nil
	}
	wait := func() error { return e.waitLanded(ctx, n, parts, units, p.exited) }
	if parts == n {
		wait = func() error { return e.waitFor(ctx, n, p.exited) } // one per entry: the sandbox's count tells
	}
	if err := wait(); err != nil {
		return r, fmt.Errorf("%w: %s", err, p.output())
	}
	r.Seconds = time.Since(t0).Seconds()
	if r.PayParts == 0 { // aggregated: what payroll holds
		r.PayParts = e.sb.PayPartCount() - e.seeded
	}
	w.end(&r)
	if err := e.checkUnits(units); err != nil {
		return r, err
	}
	if err := <-pubErr; err != nil {
		return r, err
	}
	if err := p.stop(&r); err != nil {
		return r, err
	}
	if err := <-profDone; err != nil {
		fmt.Fprintf(cfg.Progress, "%s: profile: %v\n", name, err)
	}
	if timing {
		l, err := e.latencies(ctx, published, prefix)
		if err != nil {
			return r, err
		}
		if len(l) != n {
			return r, fmt.Errorf("latency: %d of %d pay parts traced to their entry through the ledger", len(l), n)
		}
		r.setLatency(l)
	}
	e.fill(&r)
	return r, nil
}

// fetchProfile saves a CPU profile of paysync, or an execution trace
// when file ends in ".trace" (go tool trace: where goroutines wait).
func fetchProfile(addr, file string, d time.Duration) error {
	kind := "profile"
	if strings.HasSuffix(file, ".trace") {
		kind = "trace"
	}
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", addr, kind, max(1, int(d.Seconds()))))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("/debug/pprof/%s: %s", kind, resp.Status)
	}
	if err := save(resp.Body, file); err != nil {
		return err
	}
	// The heap as the profile ends, beside it.
	resp, err = http.Get(fmt.Sprintf("http://%s/debug/pprof/heap", addr))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return save(resp.Body, file+".heap")
}

func save(r io.Reader, file string) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// runCSV: a generated N-line CSV through `paysync import`.
func runCSV(ctx context.Context, cfg Config) (Result, error) {
	r := Result{Scenario: "csv", Entries: cfg.CSVLines}
	e, err := newEnv(cfg, "csv", false)
	if err != nil {
		return r, err
	}
	defer e.close()
	file := filepath.Join(e.dir, "hours.csv")
	if err := writeCSV(file, cfg, cfg.CSVLines); err != nil {
		return r, err
	}
	fmt.Fprintf(cfg.Progress, "csv: importing %d lines\n", cfg.CSVLines)
	t0 := time.Now()
	p, err := e.start([]string{"import", file})
	if err != nil {
		return r, err
	}
	<-p.exited
	r.Seconds = time.Since(t0).Seconds()
	if err := p.stop(&r); err != nil {
		return r, err
	}
	r.PayParts = e.sb.PayPartCount()
	if r.PayParts == 0 {
		return r, fmt.Errorf("no pay part created: %s", p.output())
	}
	e.fill(&r)
	return r, nil
}

// writeCSV writes n lines: every company × employee × code T1 aggregates
// into one pay part, as a nightly export does.
func writeCSV(file string, cfg Config, n int) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<16)
	fmt.Fprintln(w, "id,company_id,employee_id,date,hours,code")
	for i := range n {
		c := i%cfg.Companies + 1
		emp := (i/cfg.Companies)%4 + 1
		fmt.Fprintf(w, "csv-%d,%s,%s,2026-11-%02d,%d.%d,T1\n", i, sandbox.LoadCompanyID(c), sandbox.LoadEmployeeID(c, emp), 1+i%28, 1+i%8, 25*(i%4))
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// runTrickle: single entries, each published alone once the one before
// was created; each must be created within linger + one round trip.
func runTrickle(ctx context.Context, cfg Config) (Result, error) {
	parts, _ := natsTotals(cfg, cfg.Trickle)
	r := Result{Scenario: "trickle", Entries: cfg.Trickle, PayParts: parts}
	e, err := newEnv(cfg, "trickle", true)
	if err != nil {
		return r, err
	}
	defer e.close()
	url, pub, stop, err := e.startNATS(ctx)
	if err != nil {
		return r, err
	}
	defer stop()
	rtt, err := roundTrip(ctx, e)
	if err != nil {
		return r, err
	}
	e.before = e.sb.State().Counters.Requests // the probes are not paysync's calls
	r.RoundTripMs = ms(rtt)
	r.BoundMs = ms(cfg.Linger + rtt)
	addr, err := freeAddr()
	if err != nil {
		return r, err
	}
	extra, err := e.runEnv(cfg, url, addr)
	if err != nil {
		return r, err
	}
	p, err := e.start([]string{"run"}, extra...)
	if err != nil {
		return r, err
	}
	defer p.stop(&Result{})
	if err := waitReady(ctx, addr, p); err != nil {
		return r, err
	}
	const prefix = "trickle-"
	published := make([]int64, cfg.Trickle)
	e.seeded, e.seededUnits = e.sb.PayPartCount(), e.unitsHeld()
	t0 := time.Now()
	for i := range cfg.Trickle {
		if err := pub.publish(ctx, cfg, prefix, i, i+1, published); err != nil {
			return r, err
		}
		// Aggregated, an entry of a group seen before replaces its pay
		// part: landed entries tell, not the sandbox's count.
		parts, units := natsTotals(cfg, i+1)
		if err := e.waitLanded(ctx, i+1, parts, units, p.exited); err != nil {
			return r, err
		}
		// Apart enough that each entry is alone in its batch.
		time.Sleep(20 * time.Millisecond)
	}
	r.Seconds = time.Since(t0).Seconds()
	if r.PayParts == 0 { // aggregated: what payroll holds
		r.PayParts = e.sb.PayPartCount() - e.seeded
	}
	if err := p.stop(&r); err != nil {
		return r, err
	}
	l, err := e.latencies(ctx, published, prefix)
	if err != nil {
		return r, err
	}
	r.setLatency(l)
	e.fill(&r)
	return r, nil
}

// roundTrip is the median of a few one-item create_pay_parts calls made
// the way paysync makes them (payroll.Client), before paysync starts; the
// pay parts they create are counted out of the result.
func roundTrip(ctx context.Context, e *env) (time.Duration, error) {
	url := e.sb.URL()
	o := e.sb.Options()
	cl, err := payroll.New(payroll.Config{URL: url, AuthURL: url, Realm: o.Realm, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
		RefreshToken: e.sb.IssueRefreshToken()})
	if err != nil {
		return 0, err
	}
	company := sandbox.LoadCompanyID(1)
	item := paysync.PayPartInput{EmployeeID: sandbox.LoadEmployeeID(1, 1), Code: "T1"}
	item.Units = decimal.NewNullDecimal(decimal.New(1, 0))
	// The first call probes the schema and fetches a token: not timed.
	if _, err := cl.CreatePayParts(ctx, company, []paysync.PayPartInput{item}); err != nil {
		return 0, err
	}
	var ds []time.Duration
	for range 9 {
		t0 := time.Now()
		if _, err := cl.CreatePayParts(ctx, company, []paysync.PayPartInput{item}); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	slices.Sort(ds)
	return ds[len(ds)/2], nil
}

// runEnv is paysync run's environment for a NATS scenario: the server, the
// health listener, and with NoAggregate rules that keep one pay part per
// entry.
func (e *env) runEnv(cfg Config, natsURL, httpAddr string) ([]string, error) {
	extra := []string{"NATS_URL=" + natsURL, "PAYSYNC_HTTP_ADDR=" + httpAddr}
	if cfg.NoAggregate {
		rules := filepath.Join(e.dir, "rules.yaml")
		if err := os.WriteFile(rules, []byte("version: 1\naggregate: false\n"), 0o600); err != nil {
			return nil, err
		}
		extra = append(extra, "PAYSYNC_MAPPING="+rules)
	}
	return extra, nil
}
