package loadtest

// The peer: Benthos v4 as an integrator would configure it for the job
// `paysync run` does (../shared/bench/benthos). runPeer runs the same
// backlog through paysync and then through Benthos, each side on a fresh
// embedded NATS server and a fresh sandbox of its own, so each consumes its
// own copy of the entries and completion is what that side's sandbox
// created. The sides run one after the other, not at once: on a 2-core
// machine two consumers at once would measure how they share the cores.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/paysync/paysync/worker/stream"
)

// Comparison is paysync against the peer in one run.
// Both sides are measured per entry: Benthos makes one pay part per
// entry, paysync aggregated makes one per group.
type Comparison struct {
	PaysyncPerSec float64 `json:"paysync_entries_per_sec"`
	BenthosPerSec float64 `json:"benthos_entries_per_sec"`
	// Ratio is paysync's rate ÷ Benthos's.
	Ratio float64 `json:"ratio"`
	// CPU per entry of each side, and paysync's ÷ Benthos's.
	PaysyncCPUMicros float64 `json:"paysync_cpu_us_per_entry"`
	BenthosCPUMicros float64 `json:"benthos_cpu_us_per_entry"`
	CPURatio         float64 `json:"cpu_ratio"`
	// Aggregated says paysync's side ran under rules that aggregate.
	Aggregated bool `json:"aggregated"`
}

// compare builds the comparison of two measured sides.
func compare(paysync, benthos Result) Comparison {
	c := Comparison{PaysyncPerSec: paysync.EntriesPerSec, BenthosPerSec: benthos.EntriesPerSec,
		PaysyncCPUMicros: paysync.CPUMicrosPerEntry, BenthosCPUMicros: benthos.CPUMicrosPerEntry}
	if c.BenthosPerSec > 0 {
		c.Ratio = c.PaysyncPerSec / c.BenthosPerSec
	}
	if c.BenthosCPUMicros > 0 {
		c.CPURatio = c.PaysyncCPUMicros / c.BenthosCPUMicros
	}
	return c
}

// runPeer: the backlog through paysync, then the same backlog through
// Benthos.
func runPeer(ctx context.Context, cfg Config) ([]Result, Comparison, error) {
	if cfg.Benthos == "" || cfg.BenthosConfig == "" {
		return nil, Comparison{}, errors.New("the Benthos binary and its benthos.yaml are required")
	}
	tmpl, err := os.ReadFile(cfg.BenthosConfig)
	if err != nil {
		return nil, Comparison{}, err
	}
	// paysync's side runs under cfg's rules: aggregated by default
	// (payroll ends with one pay part per company × employee × code ×
	// month, each the exact total), one pay part per entry with
	// NoAggregate (--no-aggregate), as Benthos creates them. The sides are
	// compared on entries/s and CPU per entry.
	cfg.units = true
	cpu0 := selfCPU()
	a, err := runNATS(ctx, cfg, "peer-paysync", cfg.Entries, true)
	if err != nil {
		return nil, Comparison{}, fmt.Errorf("paysync: %w", err)
	}
	a.HarnessCPUSeconds = selfCPU() - cpu0
	cpu0 = selfCPU()
	b, err := runBenthos(ctx, cfg, tmpl)
	if err != nil {
		return nil, Comparison{}, fmt.Errorf("benthos: %w", err)
	}
	b.HarnessCPUSeconds = selfCPU() - cpu0
	cmp := compare(a, b)
	cmp.Aggregated = !cfg.NoAggregate
	return []Result{a, b}, cmp, nil
}

// runBenthos: a backlog of cfg.Entries through Benthos into its own sandbox.
func runBenthos(ctx context.Context, cfg Config, tmpl []byte) (Result, error) {
	const name = "peer-benthos"
	n := cfg.Entries
	r := Result{Scenario: name, Entries: n, PayParts: n}
	e, err := newEnv(cfg, name, false)
	if err != nil {
		return r, err
	}
	defer e.close()
	natsURL, pub, stop, err := e.startNATS(ctx)
	if err != nil {
		return r, err
	}
	defer stop()
	companies := make([]string, cfg.Companies)
	for i := range companies {
		companies[i] = sandbox.LoadCompanyID(i + 1)
	}
	conf, err := benthosConfig(tmpl, companies)
	if err != nil {
		return r, err
	}
	file := filepath.Join(e.dir, "benthos.yaml")
	if err := os.WriteFile(file, conf, 0o600); err != nil {
		return r, err
	}
	fmt.Fprintf(cfg.Progress, "%s: publishing a backlog of %d entries\n", name, n)
	t0 := time.Now()
	if err := pub.publish(ctx, cfg, "load-", 0, n, nil); err != nil {
		return r, err
	}
	r.PublishSeconds = time.Since(t0).Seconds()
	token, err := accessToken(ctx, e)
	if err != nil {
		return r, err
	}
	e.before = e.sb.State().Counters.Requests
	env := append(os.Environ(), "NATS_URL="+natsURL, "PAYROLL_URL="+e.sb.URL(), "PAYROLL_TOKEN="+token,
		"PB_BATCH="+strconv.Itoa(cfg.Batch), "PB_PERIOD="+cfg.Linger.String(),
		"PB_IN_FLIGHT="+strconv.Itoa(cfg.InFlight), "PB_LOG_LEVEL=warn")
	t0, w := time.Now(), startWindow()
	p, err := startProc("benthos", cfg.Benthos, []string{"--log.level", "warn", "-c", file}, env)
	if err != nil {
		return r, err
	}
	defer p.stop(&Result{})
	if err := waitPeer(ctx, e, n, p); err != nil {
		return r, err
	}
	r.Seconds = time.Since(t0).Seconds()
	w.end(&r)
	if err := p.stop(&r); err != nil {
		return r, err
	}
	// Benthos has no exactly-once: more than one pay part per entry is
	// reported, not failed (paysync's side fails on it).
	r.ExtraPayParts = e.sb.PayPartCount() - n
	e.fill(&r)
	return r, nil
}

// waitPeer polls until the sandbox holds want pay parts. Benthos never
// exits on an empty stream, and acks a batch whose create the API refused
// in a 200 reply, so a stall is the only sign of a refused batch.
func waitPeer(ctx context.Context, e *env, want int, p *proc) error {
	const stall = 30 * time.Second
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	last, lastAt := -1, time.Now()
	for {
		n := e.sb.PayPartCount()
		if n >= want {
			return nil
		}
		if n != last {
			last, lastAt = n, time.Now()
		} else if time.Since(lastAt) > stall {
			return fmt.Errorf("stalled at %d of %d pay parts for %s after %d create_pay_parts calls (Benthos acks a refused batch as done): %s",
				n, want, stall, e.sb.State().Counters.Requests["create_pay_parts"], p.output())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.exited:
			return fmt.Errorf("benthos exited with %d of %d pay parts created: %v: %s", n, want, p.err, p.output())
		case <-t.C:
		}
	}
}

// accessToken gets an access token from the sandbox by the refresh grant,
// as an integrator would fetch one before starting Benthos.
func accessToken(ctx context.Context, e *env) (string, error) {
	o := e.sb.Options()
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {e.sb.IssueRefreshToken()},
		"client_id": {o.ClientID}, "client_secret": {o.ClientSecret}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		e.sb.URL()+"/auth/realms/"+url.PathEscape(o.Realm)+"/protocol/openid-connect/token", strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("token: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || tok.AccessToken == "" {
		return "", fmt.Errorf("token: no access token in the reply (%v)", err)
	}
	return tok.AccessToken, nil
}

// benthosConfig returns the template (benthos.yaml) with its per-company
// inputs replaced by one per company: each is a broker holding one
// nats_jetstream input and its own batching, and the first one is copied
// with its subject filter and durable name set for the company. Benthos
// substitutes ${VAR} before it parses YAML, so the file is edited as
// lines rather than parsed.
func benthosConfig(tmpl []byte, companies []string) ([]byte, error) {
	if len(companies) == 0 {
		return nil, errors.New("benthos.yaml: no companies")
	}
	lines := strings.SplitAfter(string(tmpl), "\n")
	// A block: "- broker:", "inputs:", "- nats_jetstream: {...}", "batching: ...".
	var starts []int
	for i := 0; i+3 < len(lines); i++ {
		if strings.TrimSpace(lines[i]) == "- broker:" && strings.TrimSpace(lines[i+1]) == "inputs:" &&
			strings.HasPrefix(strings.TrimSpace(lines[i+2]), "- nats_jetstream:") &&
			subjectRE.MatchString(lines[i+2]) && durableRE.MatchString(lines[i+2]) &&
			strings.HasPrefix(strings.TrimSpace(lines[i+3]), "batching:") {
			starts = append(starts, i)
		}
	}
	if len(starts) == 0 {
		return nil, errors.New("benthos.yaml: no per-company input (a broker holding one nats_jetstream input with subject and durable, then batching)")
	}
	for k := 1; k < len(starts); k++ {
		if starts[k] != starts[k-1]+4 {
			return nil, errors.New("benthos.yaml: the per-company inputs are not one after the other")
		}
	}
	first, end := starts[0], starts[len(starts)-1]+4
	var out bytes.Buffer
	for _, l := range lines[:first] {
		out.WriteString(l)
	}
	for _, c := range companies {
		// The filter as stream.Subject writes the company's token.
		filter := strings.TrimSuffix(stream.Subject(stream.DefaultPrefix, c, "x"), ".x") + ".>"
		in := subjectRE.ReplaceAllLiteralString(lines[first+2], `subject: "`+filter+`"`)
		in = durableRE.ReplaceAllLiteralString(in, "durable: benthos_"+durableToken(c))
		out.WriteString(lines[first])
		out.WriteString(lines[first+1])
		out.WriteString(in)
		out.WriteString(lines[first+3])
	}
	for _, l := range lines[end:] {
		out.WriteString(l)
	}
	return out.Bytes(), nil
}

var (
	subjectRE = regexp.MustCompile(`subject: "[^"]*"`)
	durableRE = regexp.MustCompile(`durable: [A-Za-z0-9_-]+`)
)

// durableToken makes a company id (base64, which may hold + / =) fit a
// consumer name.
func durableToken(c string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, c)
}

// BenthosBinary is where BuildBenthos keeps the build of the source in src:
// a directory under cacheDir named by a hash of go.mod, go.sum and main.go,
// so a changed source is built again.
func BenthosBinary(cacheDir, src string) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum", "main.go"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			return "", fmt.Errorf("benthos source: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", f, len(b))
		h.Write(b)
	}
	return filepath.Join(cacheDir, "paysync-load", "benthos-"+hex.EncodeToString(h.Sum(nil))[:16], "benthos"), nil
}

// BuildBenthos returns the Benthos binary built from src (the trimmed
// build in ../shared/bench/benthos), building it on first use into the
// user's cache directory (or the temporary directory when there is none).
// The build runs outside this module; its modules come from the module
// proxy (about 2 minutes the first time).
func BuildBenthos(ctx context.Context, src string, log io.Writer) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	bin, err := BenthosBinary(cache, src)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(log, "building Benthos from %s into %s (about 2 minutes the first time)\n", src, filepath.Dir(bin))
	tmp := bin + ".tmp" + strconv.Itoa(os.Getpid())
	build := exec.CommandContext(ctx, "go", "build", "-o", tmp, ".")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	build.Stdout, build.Stderr = log, log
	if err := build.Run(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("build benthos in %s: %w", src, err)
	}
	// Renamed into place whole, so a build cut short is never taken for one.
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}
