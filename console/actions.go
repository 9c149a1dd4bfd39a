package console

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/ledger"
	"github.com/paysync/paysync/mapping"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/worker"
	"github.com/shopspring/decimal"
)

// Payroll is what the actions read from payroll (*payroll.Client): what
// it holds (a revert's preview) and the start-up reads a replay maps with.
type Payroll interface {
	worker.StartupPayroll
	worker.PayPartsReader
}

// Actions carries out the CLI's revert, replay and period close for the
// console, through the same services (worker.PreviewRevert,
// Deliverer.Revert, Corrector.RevertScope and ReplayScope, the ledger's
// ClosePeriod).
type Actions struct {
	Payroll Payroll
	// Deliverer returns a deliverer for one action (the session's).
	Deliverer func() *worker.Deliverer
	// Waiter bounds one action's payroll reads (PAYSYNC_STARTUP_TIMEOUT).
	Waiter func() *payroll.Waiter
	Rules  *mapping.Rules // a replay's rules (PAYSYNC_MAPPING)
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
}

func (a *Actions) inDaemon() bool { return a.Wake != nil }

// target is what an action is about, from its form or query.
type target struct {
	Op      string // revert, replay, close, open
	Batch   int64
	Import  int64
	Period  string
	Source  string
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

func (t target) scope() ledger.Scope {
	p, _ := paysync.ParsePeriod(t.Period)
	return ledger.Scope{Period: p, Origin: t.Source, Company: t.Company}
}

// String names the target as the audit log does.
func (t target) String() string {
	switch {
	case t.Batch != 0:
		return fmt.Sprintf("batch %d", t.Batch)
	case t.Import != 0:
		return fmt.Sprintf("import %d", t.Import)
	}
	return "period " + t.scope().String()
}

// deltaRow is one pay part an action deletes or creates.
type deltaRow struct {
	Op                    string // delete, create, keep (already gone)
	Batch                 int64
	PayrollID             string
	CompanyID, EmployeeID string
	EmployeeName, Code    string
	Units, Rate, Amount   decimal.NullDecimal
	Note                  string
}

// deltaTotal is an action's change for one company × employee × code.
type deltaTotal struct {
	CompanyID, EmployeeID, EmployeeName, Code string
	Deleted, Created                          int
	Units, Amount                             decimal.NullDecimal // created minus deleted (none: the pay parts have none)
}

// plan is an action's preview: the exact delta, and whether it changes
// anything.
type plan struct {
	Target  target
	Rows    []deltaRow
	Totals  []deltaTotal
	Notes   []string
	Changes bool
	Digest  string // of what the preview showed: the confirmation must find the same
	// Period is a close's or open's period totals.
	Period []ledger.PeriodTotal
	scope  *ledger.Scope // a revert of a NATS message: its entries' pay parts
	ids    []int64       // the batches a batch or import revert reverts (or replay replays)
	// replay is a batch's or an import's replay plan, and the replayer
	// that planned it (and carries it out).
	replay   *worker.ReplayPlan
	replayer *worker.Replayer
}

func (p *plan) finish() {
	byKey := map[string]*deltaTotal{}
	var keys []string
	h := sha256.New()
	fmt.Fprintln(h, p.Target.Op, p.Target.String(), p.Changes, p.ids)
	for _, r := range p.Rows {
		fmt.Fprintln(h, r.Op, r.Batch, r.PayrollID, r.CompanyID, r.EmployeeID, r.Code, r.Units, r.Rate, r.Amount)
		if r.Op == "keep" {
			continue
		}
		k := r.CompanyID + "\x00" + r.EmployeeID + "\x00" + r.Code
		t := byKey[k]
		if t == nil {
			t = &deltaTotal{CompanyID: r.CompanyID, EmployeeID: r.EmployeeID, EmployeeName: r.EmployeeName, Code: r.Code}
			byKey[k] = t
			keys = append(keys, k)
		}
		sign := decimal.NewFromInt(1)
		if r.Op == "delete" {
			t.Deleted++
			sign = sign.Neg()
		} else {
			t.Created++
		}
		if r.Units.Valid {
			t.Units = decimal.NewNullDecimal(t.Units.Decimal.Add(r.Units.Decimal.Mul(sign)))
		}
		if r.Amount.Valid {
			t.Amount = decimal.NewNullDecimal(t.Amount.Decimal.Add(r.Amount.Decimal.Mul(sign)))
		}
	}
	for _, pt := range p.Period {
		fmt.Fprintln(h, pt.CompanyID, pt.Origin, pt.Period, pt.PayParts, pt.Units, pt.Amount)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p.Totals = append(p.Totals, *byKey[k])
	}
	p.Digest = hex.EncodeToString(h.Sum(nil))[:32]
}

// errBusyInDaemon: inside paysync run, a batch still on its way is the
// daemon's to send.
var errBusyInDaemon = errors.New("is still being sent by paysync run (pending, sending or failed): revert it once it is sent, or revert its period")

// preview plans an action without changing anything.
func (s *Server) plan(ctx context.Context, t target) (plan, error) {
	a := s.cfg.Actions
	p := plan{Target: t}
	l := s.cfg.Ledger
	switch t.Op {
	case "close", "open":
		closed, err := l.ClosedPeriods(ctx)
		if err != nil {
			return p, err
		}
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
	case "replay":
		if t.Period == "" {
			return s.planReplay(ctx, p)
		}
	case "revert":
		if t.Period == "" {
			tg, err := worker.RevertTargetOf(ctx, l, t.Batch, t.Import)
			if err != nil {
				return p, err
			}
			if tg.Scope == nil {
				return s.planBatches(ctx, p, tg.Batches)
			}
			p.scope = tg.Scope
		}
	}
	sc := t.scope()
	if p.scope != nil {
		sc = *p.scope
	}
	corr, err := s.corrector(ctx, t.Op)
	if err != nil {
		return p, err
	}
	run := corr.RevertScope
	if t.Op == "replay" {
		run = corr.ReplayScope
	}
	res, err := run(ctx, sc, true)
	if err != nil {
		return p, err
	}
	for _, sp := range res.Unit.Supersede {
		id := sp.PayrollID
		note := ""
		if id == "" {
			note = "not sent yet: simply not sent"
		}
		p.Rows = append(p.Rows, deltaRow{Op: "delete", Batch: sp.BatchID, PayrollID: id, CompanyID: sp.CompanyID, EmployeeID: sp.EmployeeID,
			EmployeeName: sp.EmployeeName, Code: sp.Code, Units: sp.Units, Rate: sp.Rate, Amount: sp.Amount, Note: note})
	}
	for _, pp := range res.Unit.PayParts {
		p.Rows = append(p.Rows, deltaRow{Op: "create", CompanyID: pp.CompanyID, EmployeeID: pp.EmployeeID, EmployeeName: pp.EmployeeName,
			Code: pp.Code, Units: pp.Units, Rate: pp.Rate, Amount: pp.Amount})
	}
	p.Changes = res.Changes()
	if !p.Changes {
		p.Notes = append(p.Notes, fmt.Sprintf("%s %s: nothing to change: payroll holds what the ledger's entries make of it", t.Op, sc))
	}
	if res.Spanning > 0 {
		p.Notes = append(p.Notes, fmt.Sprintf("%d pay parts sum entries of the period and of another one (imported before pay parts were per period): left alone; revert their import instead", res.Spanning))
	}
	_ = a
	p.finish()
	return p, nil
}

// planBatches is a batch's or an import's revert: what payroll still
// holds of its pay parts (worker.PreviewRevert, as paysync revert shows).
func (s *Server) planBatches(ctx context.Context, p plan, bs []ledger.Batch) (plan, error) {
	a := s.cfg.Actions
	if a.inDaemon() {
		for _, b := range bs {
			switch b.State {
			case paysync.BatchPending, paysync.BatchSending, paysync.BatchFailed, paysync.BatchReverting:
				return p, fmt.Errorf("batch %d %w", b.ID, errBusyInDaemon)
			}
		}
	}
	pv, err := worker.PreviewRevert(ctx, s.cfg.Ledger, a.Waiter(), a.Payroll, bs)
	if err != nil {
		return p, err
	}
	p.ids = pv.Batches
	for _, r := range pv.Rows {
		op := "keep"
		if r.InPayroll {
			op = "delete"
		}
		p.Rows = append(p.Rows, deltaRow{Op: op, Batch: r.BatchID, PayrollID: r.PayrollID, CompanyID: r.CompanyID, EmployeeID: r.EmployeeID,
			EmployeeName: r.EmployeeName, Code: r.Code, Units: r.Units, Rate: r.Rate, Amount: r.Amount, Note: r.Status()})
	}
	p.Notes = append(p.Notes, pv.Summary())
	// A batch not reverted yet changes (its state) even when payroll holds
	// nothing of it any more.
	for _, b := range bs {
		if b.State != paysync.BatchReverted && b.State != paysync.BatchSplit {
			p.Changes = true
		}
	}
	p.finish()
	return p, nil
}

// planReplay is a batch's or an import's replay: its stored entries
// mapped with the current rules into the pay parts payroll gets, leaving
// out those an earlier replay put in payroll (worker.Replayer.Plan, as
// paysync replay shows it). It refuses while the pay parts replayed are
// still in payroll: the console never pays twice.
func (s *Server) planReplay(ctx context.Context, p plan) (plan, error) {
	a, t := s.cfg.Actions, p.Target
	if t.Import != 0 {
		src, err := s.cfg.Ledger.Source(ctx, t.Import)
		if err != nil {
			return p, err
		}
		if src.Status == paysync.SourceRejected {
			return p, fmt.Errorf("import %d was refused as a whole: none of its entries are in the ledger to replay; once its problems are fixed, paysync replay --import %d imports its stored input again", t.Import, t.Import)
		}
	}
	r, err := worker.NewReplayer(ctx, a.Waiter(), a.Payroll, s.cfg.Ledger, a.Deliverer(), a.Rules, a.Company, a.BatchSize)
	if err != nil {
		return p, err
	}
	rp, err := r.Plan(ctx, t.Batch, t.Import, false)
	if err != nil {
		return p, err
	}
	p.replay, p.replayer, p.ids = &rp, r, rp.Originals
	for _, pp := range rp.PayParts {
		p.Rows = append(p.Rows, deltaRow{Op: "create", CompanyID: pp.CompanyID, EmployeeID: pp.EmployeeID, EmployeeName: pp.EmployeeName,
			Code: pp.Code, Units: pp.Units, Rate: pp.Rate, Amount: pp.Amount, Note: fmt.Sprintf("will be created (%d entries)", len(pp.Entries))})
	}
	p.Notes = append(p.Notes, rp.Notes()...)
	for _, e := range rp.Problems {
		p.Notes = append(p.Notes, "not replayed: "+e.Error())
	}
	p.Changes = len(rp.PayParts) > 0
	if !p.Changes {
		p.Notes = append(p.Notes, fmt.Sprintf("replay %s: nothing left to replay", t))
	}
	p.finish()
	return p, nil
}

// carryOutReplay sends a replay plan: as paysync replay does, what an
// earlier run left in flight is settled and what an earlier replay of
// these entries left open is sent first; inside paysync run, the plan is
// recorded and the daemon sends it.
func (s *Server) carryOutReplay(ctx context.Context, p plan) (string, error) {
	a, r, t := s.cfg.Actions, p.replayer, p.Target
	if a.inDaemon() {
		ids, err := r.Commit(ctx, *p.replay)
		if err != nil {
			return "", err
		}
		a.Wake()
		return fmt.Sprintf("replay %s: recorded as batches %v: %d pay parts to create; paysync run sends them now (see the batches)", t, ids, len(p.replay.PayParts)), nil
	}
	if err := a.Waiter().Do(ctx, worker.WaitRecovery, r.D.Recover); err != nil {
		return "", err
	}
	resumed, err := r.Resume(ctx, t.Batch, t.Import)
	if err != nil {
		return "", err
	}
	ids, err := r.Run(ctx, *p.replay)
	if err != nil {
		return "", err
	}
	msg := fmt.Sprintf("replayed into batches %v: %d pay parts created, %d rejected", ids, r.D.Stats.Created, r.D.Stats.Rejected)
	if len(resumed) > 0 {
		msg = fmt.Sprintf("finished batches %v left open by an earlier replay; %s", resumed, msg)
	}
	unfinished, err := worker.Unfinished(ctx, s.cfg.Ledger, append(resumed, ids...))
	if err != nil {
		return "", err
	}
	switch {
	case r.D.Stats.Rejected > 0:
		return "", fmt.Errorf("%s: payroll rejected %d pay parts (see the batches)", msg, r.D.Stats.Rejected)
	case unfinished > 0:
		return "", fmt.Errorf("%s: %d batches did not finish; they stay pending and are sent by the next replay, import or paysync run", msg, unfinished)
	}
	return msg, nil
}

// corrector is a period action's worker.Corrector; a replay's maps with
// the schema and company payroll names (the start-up reads).
func (s *Server) corrector(ctx context.Context, op string) (*worker.Corrector, error) {
	a := s.cfg.Actions
	if op != "replay" {
		return &worker.Corrector{L: s.cfg.Ledger, Rules: mapping.DefaultRules(), BatchSize: a.BatchSize}, nil
	}
	schema, company, err := worker.StartupReads(ctx, a.Waiter(), a.Payroll, a.Rules, a.Company, nil)
	if err != nil {
		return nil, err
	}
	mapper := mapping.NewMapper(a.Rules, mapping.NewCache(a.Payroll), schema, company)
	return &worker.Corrector{L: s.cfg.Ledger, Mapper: mapper, Rules: a.Rules, Wire: schema, BatchSize: a.BatchSize}, nil
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
		return fmt.Sprintf("period %s closed: its corrections are refused until it is opened again", pp), nil
	case "open":
		pp, _ := paysync.ParsePeriod(t.Period)
		changed, err := l.ReopenPeriod(ctx, pp)
		if err != nil {
			return "", err
		}
		if !changed {
			return fmt.Sprintf("period %s was open already: nothing changed", pp), nil
		}
		return fmt.Sprintf("period %s opened again", pp), nil
	}
	if p.replay != nil {
		return s.carryOutReplay(ctx, p)
	}
	d := a.Deliverer()
	w := a.Waiter()
	if t.Op == "revert" && p.scope == nil && t.Period == "" {
		if !a.inDaemon() {
			if err := w.Do(ctx, worker.WaitRecovery, d.Recover); err != nil {
				return "", err
			}
		}
		if err := d.Revert(ctx, p.ids); err != nil {
			return "", err
		}
		return fmt.Sprintf("reverted batches %v: %d deleted, %d already gone", p.ids, d.Stats.Deleted, d.Stats.Gone), nil
	}
	sc := t.scope()
	if p.scope != nil {
		sc = *p.scope
	}
	if !a.inDaemon() {
		if err := w.Do(ctx, worker.WaitRecovery, d.Recover); err != nil {
			return "", err
		}
	}
	corr, err := s.corrector(ctx, t.Op)
	if err != nil {
		return "", err
	}
	run := corr.RevertScope
	if t.Op == "replay" {
		run = corr.ReplayScope
	}
	res, err := run(ctx, sc, false)
	if err != nil {
		return "", err
	}
	if a.inDaemon() {
		a.Wake()
		return fmt.Sprintf("%s %s: recorded as batches %v: %d pay parts to delete, %d to create; paysync run sends them now (see the batches)", t.Op, sc, res.Batches, len(res.Unit.Supersede), len(res.Unit.PayParts)), nil
	}
	if _, err := d.DeliverOpen(ctx, 0, nil); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s %s: %d deleted, %d already gone, %d created (batches %v)", t.Op, sc, d.Stats.Deleted, d.Stats.Gone, d.Stats.Created, res.Batches), nil
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
	t, err := parseTarget(op, r.URL.Query())
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
	t, err := parseTarget(op, r.PostForm)
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
		msg := s.actionError(err)
		s.render(w, r, http.StatusBadGateway, "result", c, resultData{Target: t, Entry: finish(ledger.AuditFailed, msg), Message: msg, Failed: true})
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
	case errors.Is(err, worker.ErrScopeBusy):
		return err.Error()
	case errors.Is(err, worker.ErrStillInPayroll):
		return err.Error() + " (the console never pays twice: it has no --force)"
	}
	return err.Error()
}
