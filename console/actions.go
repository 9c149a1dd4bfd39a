package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/worker"
	"github.com/shopspring/decimal"
)

// Payroll is what the actions read from payroll (*payroll.Client): the
// start-up reads the reconciler maps and plans with.
type Payroll interface {
	worker.StartupPayroll
}

// Actions carries out the CLI's revert, replay and period close for the
// console, through the same services: worker.Operations (the desired
// state changed, then the reconciler's plan applied and sent) and the
// ledger's ClosePeriod and ReopenPeriod.
type Actions struct {
	Payroll Payroll
	// Deliverer returns a deliverer for one action (the session's).
	Deliverer func() *worker.Deliverer
	// Waiter bounds one action's payroll reads (PAYSYNC_STARTUP_TIMEOUT).
	Waiter func() *payroll.Waiter
	Rules  *mapping.Rules // the rules a replay maps with (PAYSYNC_MAPPING)
	// Company is the configured default company (PAYSYNC_COMPANY_ID).
	Company   string
	BatchSize int
	// Lock takes the ledger's work lock for one action (paysync console);
	// nil: the process holds it already (paysync run).
	Lock func(ctx context.Context) (unlock func(), err error)
	// Wake, inside paysync run, tells the daemon's sending loop that an
	// action recorded batches to send: the daemon sends them and nothing
	// else does. nil: the action delivers them itself.
	Wake func()

	mu sync.Mutex // one action at a time

	// The overview's reconciler (it only plans), kept a while so that a
	// page does not read payroll's schema each time.
	viewMu  sync.Mutex
	viewRec *worker.Reconciler
	viewErr error
	viewAt  time.Time
}

func (a *Actions) inDaemon() bool { return a.Wake != nil }

// reconciler is an action's reconciler: payroll's schema and default
// company read through the action's waiter, as the CLI's commands build it.
func (a *Actions) reconciler(ctx context.Context, l *ledger.Ledger, w *payroll.Waiter) (*worker.Reconciler, error) {
	return worker.NewReconciler(ctx, w, a.Payroll, l, a.Rules, a.Company, a.BatchSize)
}

// How long the overview waits for payroll's start-up reads, keeps the
// reconciler it built, and waits before it tries again after a failure.
const (
	viewWait  = 5 * time.Second
	viewKeep  = time.Minute
	viewRetry = 15 * time.Second
)

// viewReconciler is the overview's reconciler (it only plans): built
// (payroll read) at most once a minute, waiting at most viewWait for
// payroll; a failure is kept viewRetry, so that pages do not each wait.
func (a *Actions) viewReconciler(ctx context.Context, l *ledger.Ledger) (*worker.Reconciler, error) {
	a.viewMu.Lock()
	defer a.viewMu.Unlock()
	now := time.Now()
	switch age := now.Sub(a.viewAt); {
	case a.viewRec != nil && age >= 0 && age < viewKeep:
		return a.viewRec, nil
	case a.viewErr != nil && age >= 0 && age < viewRetry:
		return nil, a.viewErr
	}
	w := a.Waiter()
	if until := now.Add(viewWait); w.Until.IsZero() || w.Until.After(until) {
		w.Until = until
	}
	a.viewRec, a.viewErr = a.reconciler(ctx, l, w)
	a.viewAt = time.Now()
	if a.viewErr != nil && ctx.Err() != nil {
		a.viewAt = time.Time{} // the page was left: not payroll's failure
	}
	return a.viewRec, a.viewErr
}

// target is what an action is about, from its form or query.
type target struct {
	Op      string // revert, replay, close, open
	Batch   int64
	Import  int64
	Period  string
	Source  string // the period page's filter; no action takes it
	Company string
}

func parseTarget(op string, v url.Values) (target, error) {
	t := target{Op: op, Period: strings.TrimSpace(v.Get("period")), Source: strings.TrimSpace(v.Get("source")), Company: strings.TrimSpace(v.Get("company"))}
	for name, dst := range map[string]*int64{"batch": &t.Batch, "import": &t.Import} {
		if s := v.Get(name); s != "" {
			id, err := strconv.ParseInt(s, 10, 64)
			if err != nil || id <= 0 {
				return t, fmt.Errorf("%s: %q is not an id", name, s)
			}
			*dst = id
		}
	}
	n := 0
	for _, set := range []bool{t.Batch != 0, t.Import != 0, t.Period != ""} {
		if set {
			n++
		}
	}
	switch {
	case op != "revert" && op != "replay" && op != "close" && op != "open":
		return t, fmt.Errorf("no action %q", op)
	case n != 1:
		return t, errors.New("name one batch, one import or one period")
	case (op == "close" || op == "open") && t.Period == "":
		return t, fmt.Errorf("%s takes a period", op)
	case (t.Source != "" || t.Company != "") && t.Period == "":
		return t, errors.New("source and company go with a period")
	case (op == "close" || op == "open") && (t.Source != "" || t.Company != ""):
		return t, fmt.Errorf("%s takes a whole period", op)
	}
	if t.Period != "" {
		p, err := paysync.ParsePeriod(t.Period)
		if err != nil {
			return t, fmt.Errorf("period: %w", err)
		}
		t.Period = p.String()
	}
	return t, nil
}

// parseAction is parseTarget for an action: a period is reverted or
// replayed for every source (of one company, or all), as paysync revert
// --period does; one source's part of it is its import's.
func parseAction(op string, v url.Values) (target, error) {
	t, err := parseTarget(op, v)
	if err == nil && t.Source != "" {
		err = fmt.Errorf("%s takes a period of every source (of one company, or all): to %s what one source brought, %s its import", op, op, op)
	}
	return t, err
}

func (t target) values() url.Values {
	v := url.Values{}
	if t.Batch != 0 {
		v.Set("batch", fmt.Sprint(t.Batch))
	}
	if t.Import != 0 {
		v.Set("import", fmt.Sprint(t.Import))
	}
	for k, s := range map[string]string{"period": t.Period, "source": t.Source, "company": t.Company} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

func (t target) scope() ledger.Target {
	return ledger.Target{Period: t.period(), Company: t.Company}
}

// period is the target's period (nil: it names none).
func (t target) period() *paysync.Period {
	if t.Period == "" {
		return nil
	}
	p, err := paysync.ParsePeriod(t.Period)
	if err != nil {
		return nil
	}
	return &p
}

// String names the target as the audit log does (as paysync revert and
// replay name theirs: ledger.Target.String).
func (t target) String() string {
	switch {
	case t.Batch != 0:
		return fmt.Sprintf("batch %d", t.Batch)
	case t.Import != 0:
		return fmt.Sprintf("import %d", t.Import)
	case t.Source != "":
		return "period " + t.scope().String()
	}
	return ledger.Target{Period: t.period(), Company: t.Company}.String()
}

// planRow is one group's line of the reconciler's plan (as paysync plan
// prints it): what payroll holds for one company × period × employee ×
// code × rate, and what it must hold.
type planRow struct {
	CompanyID, Period         string
	EmployeeID, EmployeeName  string
	Code, Rate                string
	UnitsBefore, UnitsAfter   decimal.NullDecimal
	AmountBefore, AmountAfter decimal.NullDecimal
	Entries                   int
	Change                    string // worker.ChangeKind
	Why                       string
}

// planRows are a plan's changes in paysync plan's order: company, period,
// employee, code.
func planRows(p worker.Plan) []planRow {
	cs := p.Sorted()
	out := make([]planRow, 0, len(cs))
	for _, c := range cs {
		g := c.Group
		rate := g.Key.Rate
		if rate == "-" {
			rate = ""
		}
		out = append(out, planRow{CompanyID: g.Key.Company, Period: g.Key.Period.String(), EmployeeID: g.Key.Employee, EmployeeName: g.EmployeeName,
			Code: g.Key.Code, Rate: rate, UnitsBefore: c.Before.Units, UnitsAfter: c.After.Units, AmountBefore: c.Before.Amount, AmountAfter: c.After.Amount,
			Entries: g.Lines, Change: string(c.Kind), Why: c.Why})
	}
	return out
}

// legacyNote says why a plan with entries not mapped yet plans nothing.
func legacyNote(n int) string {
	return fmt.Sprintf("%d entry versions from before this version of paysync are not mapped yet: nothing is planned until paysync run (or an import) maps them", n)
}

// plan is an action's preview, and whether it changes anything.
type plan struct {
	Target target
	// Entries are the entries a revert or replay touches.
	Entries int
	// Rows are the reconciler's plan for the target's company and period
	// before the action: what it would send now.
	Rows    []planRow
	Notes   []string
	Changes bool
	Digest  string // of what the preview showed: the confirmation must find the same
	// Period is a close's or open's period totals.
	Period []ledger.PeriodTotal
	// ops and op carry out a revert or replay.
	ops *worker.Operations
	op  worker.Operation
}

func (p *plan) finish() {
	h := sha256.New()
	fmt.Fprintln(h, p.Target.Op, p.Target.String(), p.Changes, p.Entries, p.op.Target.Batches)
	for _, r := range p.Rows {
		fmt.Fprintln(h, r.CompanyID, r.Period, r.EmployeeID, r.Code, r.Rate, r.UnitsBefore, r.UnitsAfter, r.AmountBefore, r.AmountAfter, r.Entries, r.Change, r.Why)
	}
	for _, pt := range p.Period {
		fmt.Fprintln(h, pt.CompanyID, pt.Origin, pt.Period, pt.PayParts, pt.Units, pt.Amount)
	}
	p.Digest = hex.EncodeToString(h.Sum(nil))[:32]
}

// plan previews an action without changing anything.
func (s *Server) plan(ctx context.Context, t target) (plan, error) {
	p := plan{Target: t}
	l := s.cfg.Ledger
	closed, err := l.ClosedPeriods(ctx)
	if err != nil {
		return p, err
	}
	switch t.Op {
	case "close", "open":
		isClosed := false
		for _, c := range closed {
			if c.Period.String() == t.Period {
				isClosed = true
			}
		}
		p.Changes = isClosed == (t.Op == "open")
		totals, err := l.PeriodTotals(ctx)
		if err != nil {
			return p, err
		}
		pp, _ := paysync.ParsePeriod(t.Period)
		for _, pt := range totals {
			if m, err := paysync.ParsePeriod(pt.Period); err == nil && m.Overlaps(pp) {
				p.Period = append(p.Period, pt)
			}
		}
		if !p.Changes {
			p.Notes = append(p.Notes, fmt.Sprintf("period %s is %s already: nothing to change", t.Period, map[bool]string{true: "closed", false: "open"}[isClosed]))
		}
		p.finish()
		return p, nil
	}
	// A closed period is frozen: nothing of it changes, whatever happens.
	if pp := t.period(); pp != nil {
		for _, c := range closed {
			if c.Period.Overlaps(*pp) {
				return p, fmt.Errorf("%w: period %s is in closed period %s: nothing of it changes; reopen it first (Periods: open again)", ledger.ErrClosedPeriod, pp, c.Period)
			}
		}
	}
	if t.Op == "replay" && t.Import != 0 {
		src, err := l.Source(ctx, t.Import)
		if err != nil {
			return p, err
		}
		if src.Status == paysync.SourceRejected {
			return p, fmt.Errorf("import %d was refused as a whole: none of its entries are in the ledger to replay; once its problems are fixed, paysync replay --import %d imports its stored input again", t.Import, t.Import)
		}
	}
	tg, err := worker.TargetOf(ctx, l, t.Batch, t.Import, t.period(), t.Company)
	if err != nil {
		return p, err
	}
	a := s.cfg.Actions
	r, err := a.reconciler(ctx, l, a.Waiter())
	if err != nil {
		return p, err
	}
	p.op = worker.Operation{Replay: t.Op == "replay", Target: tg}
	// Inside paysync run the daemon's sending loop sends (D nil).
	p.ops = &worker.Operations{L: l, R: r}
	if !a.inDaemon() {
		p.ops.D = a.Deliverer()
	}
	pv, err := p.ops.Preview(ctx, p.op)
	if err != nil {
		return p, err
	}
	p.Entries, p.Rows = pv.Entries, planRows(pv.Plan)
	// Something to send, or entries to change (a closed period's: recorded,
	// sent once it is opened).
	p.Changes = len(pv.Plan.Changes) > 0
	if pv.Plan.Refused != nil {
		p.Notes = append(p.Notes, pv.Plan.Refused.Error())
	}
	if pv.Plan.Legacy > 0 {
		p.Notes = append(p.Notes, legacyNote(pv.Plan.Legacy))
	}
	if !p.Changes {
		p.Notes = append(p.Notes, fmt.Sprintf("%s: nothing to send: payroll would hold what it holds", p.op))
	}
	p.finish()
	return p, nil
}

// carryOut does what plan p previewed, as the CLI does it, and says what
// it did.
func (s *Server) carryOut(ctx context.Context, p plan) (string, error) {
	a := s.cfg.Actions
	l := s.cfg.Ledger
	t := p.Target
	switch t.Op {
	case "close":
		pp, _ := paysync.ParsePeriod(t.Period)
		changed, err := l.ClosePeriod(ctx, pp, "closed in the console")
		if err != nil {
			return "", err
		}
		if !changed {
			return fmt.Sprintf("period %s was closed already: nothing changed", pp), nil
		}
		return fmt.Sprintf("period %s closed: nothing of it is created or deleted in payroll until it is opened again", pp), nil
	case "open":
		pp, _ := paysync.ParsePeriod(t.Period)
		changed, err := l.ReopenPeriod(ctx, pp)
		if err != nil {
			return "", err
		}
		if !changed {
			return fmt.Sprintf("period %s was open already: nothing changed", pp), nil
		}
		if a.inDaemon() {
			a.Wake() // the next reconcile catches up to what the period must hold
		}
		return fmt.Sprintf("period %s opened again: the next reconcile brings payroll to what its entries make of it", pp), nil
	}
	d := p.ops.D
	if d != nil {
		// As paysync revert and replay: what an earlier run left in
		// flight is settled first.
		if err := a.Waiter().Do(ctx, worker.WaitRecovery, d.Recover); err != nil {
			return "", err
		}
	}
	n, batches, err := p.ops.Run(ctx, p.op)
	if err != nil {
		return "", err
	}
	if d == nil {
		if len(batches) > 0 {
			a.Wake()
			return fmt.Sprintf("%s: %d entries touched; recorded as batches %v: paysync run sends them now (see the batches)", p.op, n, batches), nil
		}
		return fmt.Sprintf("%s: %d entries touched; no batch recorded: nothing to send now (the overview shows what the reconciler would still send)", p.op, n), nil
	}
	msg := fmt.Sprintf("%s: %d entries touched; %d deleted, %d created, %d rejected (batches %v)", p.op, n, d.Stats.Deleted, d.Stats.Created, d.Stats.Rejected, batches)
	unfinished, err := worker.Unfinished(ctx, l, batches)
	if err != nil {
		return "", err
	}
	switch {
	case d.Stats.Rejected > 0:
		return "", fmt.Errorf("%s: payroll rejected %d pay parts (see the batches)", msg, d.Stats.Rejected)
	case unfinished > 0:
		return "", fmt.Errorf("%s: %d batches did not finish; they stay pending and are sent by the next revert, replay, import or paysync run", msg, unfinished)
	}
	return msg, nil
}

// previewData is the preview page.
type previewData struct {
	Plan     plan
	Token    string // the confirmation's one-time token
	Hidden   url.Values
	Error    string
	ReadOnly bool
}

// preview shows what an action would change, and its confirmation form.
func (s *Server) preview(w http.ResponseWriter, r *http.Request, c who) {
	op := r.PathValue("op")
	t, err := parseAction(op, r.URL.Query())
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	d := previewData{Plan: plan{Target: t}, Hidden: t.values(), ReadOnly: s.cfg.Actions == nil}
	status := http.StatusOK
	if !d.ReadOnly {
		p, err := s.plan(r.Context(), t)
		if err != nil {
			d.Error, status = s.actionError(err), http.StatusConflict
		}
		d.Plan, d.Token = p, randomToken()
	}
	s.render(w, r, status, "preview", c, d)
}

// resultData is an action's outcome page.
type resultData struct {
	Target  target
	Entry   ledger.AuditEntry
	Message string
	Again   bool // the form was submitted before: nothing changed now
	Failed  bool
	Plan    *plan // a preview that changed since: shown again
	Token   string
	Hidden  url.Values
}

// act carries out a confirmed action: once per form (its one-time token
// in the audit log), and only while it would change what the preview
// showed.
func (s *Server) act(w http.ResponseWriter, r *http.Request, c who) {
	a := s.cfg.Actions
	if a == nil {
		s.fail(w, r, http.StatusForbidden, "this console is read-only: it has no payroll connection for actions")
		return
	}
	op := r.PathValue("op")
	t, err := parseAction(op, r.PostForm)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	token := r.PostFormValue("token")
	if len(token) < 20 {
		s.fail(w, r, http.StatusBadRequest, "the form has no one-time token: open the preview again")
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx := r.Context()
	l := s.cfg.Ledger
	id, used, err := l.BeginAudit(ctx, ledger.AuditEntry{Token: token, Actor: c.Actor, Remote: c.Remote, Action: t.Op, Scope: t.String()})
	if errors.Is(err, ledger.ErrAuditTokenUsed) {
		s.render(w, r, http.StatusOK, "result", c, resultData{Target: t, Entry: used, Again: true,
			Message: fmt.Sprintf("This form was submitted before (action %d, %s): nothing changed now.", used.ID, used.Result)})
		return
	}
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	finish := func(res ledger.AuditResult, msg string) ledger.AuditEntry {
		if err := l.FinishAudit(context.WithoutCancel(ctx), id, res, msg); err != nil {
			s.log.Error("console: audit", "err", err)
		}
		e := ledger.AuditEntry{ID: id, Actor: c.Actor, Remote: c.Remote, Action: t.Op, Scope: t.String(), Result: res, Detail: msg}
		s.log.Info("console action", "id", id, "actor", c.Actor, "remote", c.Remote, "action", t.Op, "scope", t.String(), "result", res, "detail", msg)
		return e
	}
	if a.Lock != nil {
		unlock, err := a.Lock(ctx)
		if err != nil {
			msg := s.actionError(err)
			s.render(w, r, http.StatusConflict, "result", c, resultData{Target: t, Entry: finish(ledger.AuditFailed, msg), Message: msg, Failed: true})
			return
		}
		defer unlock()
	}
	p, err := s.plan(ctx, t)
	if err != nil {
		msg := s.actionError(err)
		s.render(w, r, http.StatusConflict, "result", c, resultData{Target: t, Entry: finish(ledger.AuditFailed, msg), Message: msg, Failed: true})
		return
	}
	if p.Digest != r.PostFormValue("digest") {
		msg := "What this would change is not what the preview showed (payroll or the ledger changed meanwhile): nothing changed. Review the new preview below and confirm again."
		s.render(w, r, http.StatusConflict, "result", c, resultData{Target: t, Entry: finish(ledger.AuditFailed, "changed since the preview: nothing changed"),
			Message: msg, Failed: true, Plan: &p, Token: randomToken(), Hidden: t.values()})
		return
	}
	if !p.Changes {
		msg := "Nothing to change: " + strings.Join(p.Notes, "; ")
		s.render(w, r, http.StatusOK, "result", c, resultData{Target: t, Entry: finish(ledger.AuditDone, msg), Message: msg})
		return
	}
	msg, err := s.carryOut(ctx, p)
	if err != nil {
		status := http.StatusBadGateway
		if errors.Is(err, ledger.ErrClosedPeriod) {
			status = http.StatusConflict
		}
		msg := s.actionError(err)
		s.render(w, r, status, "result", c, resultData{Target: t, Entry: finish(ledger.AuditFailed, msg), Message: msg, Failed: true})
		return
	}
	s.render(w, r, http.StatusOK, "result", c, resultData{Target: t, Entry: finish(ledger.AuditDone, msg), Message: msg})
}

// actionError is an action's failure as the page says it.
func (s *Server) actionError(err error) string {
	var we *payroll.WaitError
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return "not found: " + err.Error()
	case errors.As(err, &we):
		return "payroll unavailable: " + err.Error()
	}
	return err.Error()
}
