package main

// TestReconcile_Property checks paysync against the desired-state model of
// /work/notes/model.md (kept in this file's model below), through the CLI
// only: random sequences of imports (new entries, corrections,
// tombstones), period statements, revert/replay of an import, a batch or a
// period, periods close/open and a rules change followed by replay
// --period. After every step the pay parts payroll (the sandbox) holds for
// Nordlys, summed per group company|employee|code|rate|month, must equal
// the totals the model computes independently, exactly (shopspring
// decimals, never floats); a closed period's pay parts must be exactly those
// it held when it was closed (same payroll ids and units) until it is
// opened again.
//
// Configuration (environment, no -args needed):
//
//	PAYSYNC_PROPERTY_SEEDS   seeds to run: "7", "1,4,9" or "1-20" (default 1-20)
//	PAYSYNC_PROPERTY_STEPS   operations per seed (default 25)
//	PAYSYNC_PROPERTY_OPS     only these operation kinds, comma separated (default all):
//	                         import statement revert-import replay-import revert-batch
//	                         replay-batch revert-period replay-period close open rules
//	PAYSYNC_PROPERTY_BUDGET  no new seed is started after this long (default 40s; 20s under -race)
//	PAYSYNC_PROPERTY_DETAILS how many failing seeds print their whole sequence (default 3)
//
// A seed stops at its first difference (or a usage error, or a panic of
// paysync, which is caught and reported). A failing seed prints its
// operation sequence (with each import file's content and each command's
// exit code and output), the groups that differ (payroll's pay parts
// against the model's entries behind the expected total), the model's
// entries, the ledger's batches and the command that replays exactly that
// seed; the test ends with one line per failing seed.
//
// # How pay parts are put in groups
//
// Danløn pay parts carry no date, so payroll alone cannot tell the month of
// a pay part, and the ledger's "batches show" names an entry's latest
// file:line, not the version a pay part was made from. The rules written
// here therefore give every code a rate of its own per month (the entries
// carry their month as "project", which the rules match on): T1 200 in
// 2026-10 and 210 in 2026-11, overtime T2 300/310 (or, after a rules change,
// T2 350/360 or T3 400/410). Code and rate then name the month, and a pay
// part's group is read from payroll alone. Units are the entry's hours.
//
// # The model (model.md), and the choices this test makes where it is open
//
//   - Every import is a version of each entry it lists (a tombstone, or an
//     entry of the statement's source and period a statement does not list,
//     is a version that says "gone"); versions are ordered by import. An
//     entry's current version is its latest version whose import is not
//     reverted; it counts iff that version is not a tombstone and the entry
//     is not excluded. Each version keeps the rules it was mapped under: a
//     rules change alone changes nothing; a version is mapped when imported
//     and mapped again by a replay (--import: the import's versions;
//     --period: the period's entries; BATCH: the entries it un-excludes).
//     The imports of this test all carry --source ts, so a statement's
//     "source" is every entry of the test; "the period's entries" are the
//     entries whose current version is dated in it.
//   - Exclusions (revert BATCH, revert --period) are kept per entry with
//     the time of the revert: an entry is excluded while it has one whose
//     revert came after the import of its current version (so "listed
//     again by a later import" lifts it). replay BATCH lifts that batch's
//     exclusion, replay --period all exclusions of the period's entries.
//   - revert BATCH: the groups a batch holds are those of its pay parts
//     that are live in payroll when it is reverted (`batches show N --json`:
//     its items whose payroll id payroll still has; code and rate give the
//     month). A pay part of the batch that a correction already replaced
//     holds nothing any more. The entries excluded are all the entries that
//     count in those groups (model.md: "the counting entries of those
//     groups"), whichever pay part carries them today.
//   - A closed period is frozen; its desired state still changes (imports,
//     reverts, replays of imports and batches are versions and exclusions
//     like any other). Once `periods open` unfreezes it, "the next
//     reconcile catches up to desired": the next command that imports,
//     reverts or replays must leave it at its desired state. revert
//     or replay --period of a closed period refused ("reopen it first") is
//     taken as not done: the operation names that period only, and refusing
//     it changes nothing. Any other refusal is not excused: the model
//     applies the operation and payroll must show it (replay of a batch or
//     an import that the model does not hold reverted is a no-op in the
//     model, so refusing it is fine).
//   - Cases model.md leaves open are not generated: a step that would make
//     an entry count in an open period while a closed period's frozen pay
//     parts still pay it (frozen vs. "never twice"); a revert --import
//     whose fallback version was mapped under other rules than the current
//     ones (mapped as it was, or again?), or that would bring back an
//     exclusion its import had lifted; an entry listed again unchanged
//     after a rules change that maps it otherwise (a duplicate, or a
//     version mapped anew?); a replay --import of an entry with an
//     exclusion.
//   - The number of pay parts per group is printed but not checked (only
//     the total): model.md says "normally" one.

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shopspring/decimal"

	"github.com/paysync/paysync/payroll/sandbox"
)

var (
	propMonths    = []string{"2026-10", "2026-11"}
	propEmployees = []string{sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen, sandbox.EmpSofieJensen}
	propHours     = []string{"1", "2.5", "7.25", "0.75", "4", "3.5"}
	propTypes     = []string{"normal", "overtime"}
	propIDs       = []string{"e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8"}
	propOpKinds   = []string{"import", "statement", "revert-import", "replay-import", "revert-batch", "replay-batch", "revert-period", "replay-period", "close", "open", "rules"}
)

// propVariant is one version of the rules: "normal" is always T1 (200 in
// October, 210 in November); "overtime" changes with a rules change.
type propVariant struct {
	name     string
	otCode   string
	otRate   [2]string // per month of propMonths
	normRate [2]string
}

var propVariants = []propVariant{
	{"overtime T2 300/310", "T2", [2]string{"300", "310"}, [2]string{"200", "210"}},
	{"overtime T2 350/360", "T2", [2]string{"350", "360"}, [2]string{"200", "210"}},
	{"overtime T3 400/410", "T3", [2]string{"400", "410"}, [2]string{"200", "210"}},
}

// propRateMonth: "code|rate" → month, over every variant (each rate belongs
// to one month).
var propRateMonth = func() map[string]string {
	out := map[string]string{}
	for _, v := range propVariants {
		for i, m := range propMonths {
			out["T1|"+v.normRate[i]] = m
			out[v.otCode+"|"+v.otRate[i]] = m
		}
	}
	return out
}()

func propMonthIndex(month string) int { return slices.Index(propMonths, month) }

// propMap is a line's code and rate under variant v.
func propMap(v int, typ, month string) (code, rate string) {
	i := propMonthIndex(month)
	if typ == "overtime" {
		return propVariants[v].otCode, propVariants[v].otRate[i]
	}
	return "T1", propVariants[v].normRate[i]
}

func propRulesYAML(v int) string {
	var b strings.Builder
	b.WriteString("version: 1\ncompany: " + sandbox.CompanyNordlys + "\nrules:\n")
	for _, typ := range propTypes {
		for _, m := range propMonths {
			code, rate := propMap(v, typ, m)
			fmt.Fprintf(&b, "  - name: %s %s\n    match: {type: [%s], project: [\"%s\"]}\n    code: %s\n    units: hours\n    rate: %s\n", typ, m, typ, m, code, rate)
		}
	}
	return b.String()
}

func propKey(emp, code, rate, month string) string {
	return sandbox.CompanyNordlys + "|" + emp + "|" + code + "|" + rate + "|" + month
}

func propKeyMonth(key string) string { return key[strings.LastIndex(key, "|")+1:] }

// ---------------------------------------------------------------------------
// The model.

type propContent struct{ Emp, Date, Type, Hours string }

func (c propContent) month() string { return c.Date[:7] }

type propVersion struct {
	imp     int // clock of the import that brought it
	tomb    bool
	c       propContent
	variant int // the rules it was (last) mapped under
}

type propEntry struct {
	id       string
	versions []propVersion // in import order
	excl     map[string]int
}

type propImport struct {
	clock    int
	ledgerID int64 // 0: the ledger recorded none
	file     string
	period   string // a statement's period
	reverted bool
}

type propFrozen struct {
	parts    map[string]string // payroll id → "key units"
	counting map[string]string // entry → month it counted in at the close
}

type propModel struct {
	clock   int
	variant int
	entries map[string]*propEntry
	imports map[int]*propImport
	// batches reverted by revert BATCH (not replayed since)
	revertedBatches map[int64]bool
	closed          map[string]*propFrozen
}

func newPropModel() *propModel {
	return &propModel{entries: map[string]*propEntry{}, imports: map[int]*propImport{}, revertedBatches: map[int64]bool{}, closed: map[string]*propFrozen{}}
}

func (m *propModel) clone() *propModel {
	c := &propModel{clock: m.clock, variant: m.variant, entries: map[string]*propEntry{}, imports: map[int]*propImport{},
		revertedBatches: map[int64]bool{}, closed: map[string]*propFrozen{}}
	for id, e := range m.entries {
		ne := &propEntry{id: id, versions: slices.Clone(e.versions), excl: map[string]int{}}
		for k, v := range e.excl {
			ne.excl[k] = v
		}
		c.entries[id] = ne
	}
	for k, im := range m.imports {
		ci := *im
		c.imports[k] = &ci
	}
	for k, v := range m.revertedBatches {
		c.revertedBatches[k] = v
	}
	for k, v := range m.closed {
		c.closed[k] = v // read only once made
	}
	return c
}

func (m *propModel) entry(id string) *propEntry {
	e := m.entries[id]
	if e == nil {
		e = &propEntry{id: id, excl: map[string]int{}}
		m.entries[id] = e
	}
	return e
}

func (m *propModel) sortedIDs() []string {
	ids := make([]string, 0, len(m.entries))
	for id := range m.entries {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		a, _ := strconv.Atoi(ids[i][1:])
		b, _ := strconv.Atoi(ids[j][1:])
		return a < b
	})
	return ids
}

// current is the index of e's current version (-1: none).
func (m *propModel) current(e *propEntry) int {
	for i := len(e.versions) - 1; i >= 0; i-- {
		if !m.imports[e.versions[i].imp].reverted {
			return i
		}
	}
	return -1
}

func (m *propModel) excluded(e *propEntry, v propVersion) bool {
	for _, at := range e.excl {
		if at > v.imp {
			return true
		}
	}
	return false
}

// counting returns e's current version when e counts.
func (m *propModel) counting(e *propEntry) (propVersion, bool) {
	i := m.current(e)
	if i < 0 || e.versions[i].tomb || m.excluded(e, e.versions[i]) {
		return propVersion{}, false
	}
	return e.versions[i], true
}

// dated is e's current version when it is not a tombstone (the entry is
// "of" that version's period).
func (m *propModel) dated(e *propEntry) (int, bool) {
	i := m.current(e)
	return i, i >= 0 && !e.versions[i].tomb
}

func propLine(v propVersion) string {
	code, rate := propMap(v.variant, v.c.Type, v.c.month())
	return propKey(v.c.Emp, code, rate, v.c.month())
}

// desired is the total per group and the entries behind it.
func (m *propModel) desired() (map[string]decimal.Decimal, map[string][]string) {
	tot, why := map[string]decimal.Decimal{}, map[string][]string{}
	for _, id := range m.sortedIDs() {
		e := m.entries[id]
		v, ok := m.counting(e)
		if !ok {
			continue
		}
		k := propLine(v)
		tot[k] = tot[k].Add(decimal.RequireFromString(v.c.Hours))
		why[k] = append(why[k], fmt.Sprintf("%s %s h (%s, import #%d, %s)", id, v.c.Hours, v.c.Date, v.imp, propVariants[v.variant].name))
	}
	return tot, why
}

// ---------------------------------------------------------------------------
// Operations.

type propRow struct {
	id   string
	tomb bool
	c    propContent
}

type propOp struct {
	kind    string
	args    []string
	rows    []propRow // import, statement
	period  string    // statement, revert/replay --period, close, open, rules (the replay that follows)
	imp     int       // revert/replay --import: the model's import clock
	batch   int64
	keys    map[string]bool // revert BATCH: the groups of its live pay parts
	live    []string        // revert BATCH: its live pay parts, for the trace
	variant int
	note    string // why the op was chosen (trace)
}

func (op propOp) String() string {
	s := "paysync " + strings.Join(op.args, " ")
	if op.note != "" {
		s += "   # " + op.note
	}
	return s
}

// apply changes m as op does when paysync carried it out (refused: a
// refusal the model takes as "not done").
func (m *propModel) apply(op propOp, refused bool) {
	m.clock++
	now := m.clock
	switch op.kind {
	case "import", "statement":
		m.imports[now] = &propImport{clock: now, period: op.period}
		var of []string
		if op.kind == "statement" {
			for _, id := range m.sortedIDs() {
				e := m.entries[id]
				if i, ok := m.dated(e); ok && e.versions[i].c.month() == op.period {
					of = append(of, id)
				}
			}
		}
		listed := map[string]bool{}
		for _, r := range op.rows {
			e := m.entry(r.id)
			e.versions = append(e.versions, propVersion{imp: now, tomb: r.tomb, c: r.c, variant: m.variant})
			listed[r.id] = true
		}
		for _, id := range of {
			if !listed[id] {
				e := m.entries[id]
				e.versions = append(e.versions, propVersion{imp: now, tomb: true, variant: m.variant})
			}
		}
	case "revert-import":
		m.imports[op.imp].reverted = true
	case "replay-import":
		m.imports[op.imp].reverted = false
		for _, e := range m.entries {
			for i := range e.versions {
				if e.versions[i].imp == op.imp {
					e.versions[i].variant = m.variant
				}
			}
		}
	case "revert-batch":
		for _, e := range m.entries {
			if v, ok := m.counting(e); ok && op.keys[propLine(v)] {
				e.excl[fmt.Sprintf("batch %d", op.batch)] = now
			}
		}
		m.revertedBatches[op.batch] = true
	case "replay-batch":
		cause := fmt.Sprintf("batch %d", op.batch)
		for _, e := range m.entries {
			if _, ok := e.excl[cause]; !ok {
				continue
			}
			i := m.current(e)
			was := i >= 0 && m.excluded(e, e.versions[i])
			delete(e.excl, cause)
			if was && !m.excluded(e, e.versions[i]) {
				e.versions[i].variant = m.variant
			}
		}
		delete(m.revertedBatches, op.batch)
	case "revert-period":
		if refused {
			return
		}
		for _, e := range m.entries {
			if i, ok := m.dated(e); ok && e.versions[i].c.month() == op.period {
				e.excl["period "+op.period] = now
			}
		}
	case "replay-period":
		if refused {
			return
		}
		for _, e := range m.entries {
			if i, ok := m.dated(e); ok && e.versions[i].c.month() == op.period {
				clear(e.excl)
				e.versions[i].variant = m.variant
			}
		}
	case "close":
		// the frozen snapshot is taken by the runner
	case "open":
		delete(m.closed, op.period)
	case "rules":
		m.variant = op.variant
	}
}

// ambiguous says why op, carried out on before (giving after), would be a
// case model.md leaves open ("" if none).
func propAmbiguous(before, after *propModel, op propOp) string {
	for _, id := range after.sortedIDs() {
		e := after.entries[id]
		v, counts := after.counting(e)
		// An entry paid by a closed period's frozen pay parts that would
		// count in an open period.
		if counts {
			for p, fr := range after.closed {
				if _, ok := fr.counting[id]; ok && after.closed[v.c.month()] == nil {
					return fmt.Sprintf("%s is paid in closed %s and would count in open %s", id, p, v.c.month())
				}
			}
		}
		be := before.entries[id]
		bi, ai := -1, after.current(e)
		if be != nil {
			bi = before.current(be)
		}
		if ai == bi {
			continue
		}
		// A fallback to an older version mapped under other rules.
		if ai >= 0 && ai < bi && counts {
			c1, r1 := propMap(v.variant, v.c.Type, v.c.month())
			c2, r2 := propMap(after.variant, v.c.Type, v.c.month())
			if c1 != c2 || r1 != r2 {
				return fmt.Sprintf("%s falls back to a version mapped under %q, other than the current rules", id, propVariants[v.variant].name)
			}
		}
		// An exclusion the reverted import had lifted would come back.
		if op.kind == "revert-import" {
			for cause, at := range e.excl {
				if at < op.imp {
					return fmt.Sprintf("%s: reverting import #%d would bring back its exclusion by %s", id, op.imp, cause)
				}
			}
		}
		if op.kind == "replay-import" && len(e.excl) > 0 {
			return fmt.Sprintf("%s is excluded and its version would come back by replay --import", id)
		}
		// The same content again after a rules change that maps it otherwise.
		if ai > bi && bi >= 0 && (op.kind == "import" || op.kind == "statement") {
			nv, ov := e.versions[ai], be.versions[bi]
			if !nv.tomb && !ov.tomb && nv.c == ov.c {
				c1, r1 := propMap(ov.variant, ov.c.Type, ov.c.month())
				c2, r2 := propMap(after.variant, nv.c.Type, nv.c.month())
				if c1 != c2 || r1 != r2 {
					return fmt.Sprintf("%s listed again unchanged, mapped under %q before, otherwise now", id, propVariants[ov.variant].name)
				}
			}
		}
	}
	return ""
}

// ---------------------------------------------------------------------------
// Payroll as groups.

type propActual struct {
	total map[string]decimal.Decimal
	parts map[string][]string // key → "payrollID:units"
	ids   map[string]string   // payroll id → "key units"
}

func propPayroll(sb *sandbox.Server) (propActual, []string) {
	a := propActual{total: map[string]decimal.Decimal{}, parts: map[string][]string{}, ids: map[string]string{}}
	var foreign []string
	for _, c := range sb.State().Companies {
		for _, p := range c.PayParts {
			if c.ID != sandbox.CompanyNordlys {
				foreign = append(foreign, c.ID+" "+p.ID)
				continue
			}
			rate := "-"
			if p.Rate.Valid {
				rate = p.Rate.Decimal.String()
			}
			month, ok := propRateMonth[p.Code+"|"+rate]
			if !ok {
				month = "?"
			}
			k := propKey(p.EmployeeID, p.Code, rate, month)
			units := decimal.Zero
			if p.Units.Valid {
				units = p.Units.Decimal
			}
			a.total[k] = a.total[k].Add(units)
			a.parts[k] = append(a.parts[k], p.ID+":"+units.String())
			a.ids[p.ID] = k + " " + units.String()
		}
	}
	return a, foreign
}

// ---------------------------------------------------------------------------
// The runner.

type propRun struct {
	t       *testing.T
	seed    int64
	rnd     *rand.Rand
	s       sandboxEnv
	env     map[string]string
	dir     string
	rules   string
	m       *propModel
	allowed map[string]bool
	trace   []string
	files   int
	// failures of the seeds run so far (one line each); details: how
	// many of them print their whole sequence
	failures *[]string
	details  int
	last     result // the last operation's outcome
	// lastRefused: the last operation was refused for a closed period.
	lastRefused bool
	// periods opened again (→ the step) that no command reconciled yet
	catchingUp map[string]int
}

func (r *propRun) cli(args ...string) result {
	r.t.Helper()
	var res result
	var panicked any
	var stack []byte
	func() {
		defer func() {
			if panicked = recover(); panicked != nil {
				stack = debug.Stack()
			}
		}()
		res = runInProcess(r.t, r.env, args...)
	}()
	if panicked != nil {
		r.last = result{code: -1, stderr: fmt.Sprintf("panic: %v", panicked)}
		r.fail(fmt.Sprintf("paysync %s panicked: %v\n\n%s", strings.Join(args, " "), panicked, stack))
	}
	if res.code == 2 || strings.Contains(res.stderr, "panic:") || strings.Contains(res.stderr, "goroutine ") {
		r.fail(fmt.Sprintf("paysync %s: exit %d (a usage error is a bug of this test)\n%s%s", strings.Join(args, " "), res.code, res.stdout, res.stderr))
	}
	return res
}

// fail stops the seed: msg's first lines (up to a blank line) say what
// differs; the seed's operations, the ledger's batches and the command to
// replay the seed follow for the first failing seeds (PAYSYNC_PROPERTY_DETAILS).
func (r *propRun) fail(msg string) {
	r.t.Helper()
	short, _, _ := strings.Cut(msg, "\n\n")
	*r.failures = append(*r.failures, fmt.Sprintf("seed %d: %s", r.seed, strings.ReplaceAll(short, "\n", "\n    ")))
	replay := fmt.Sprintf("PAYSYNC_PROPERTY_SEEDS=%d", r.seed)
	if len(r.allowed) < len(propOpKinds) {
		var ks []string
		for _, k := range propOpKinds {
			if r.allowed[k] {
				ks = append(ks, k)
			}
		}
		replay += " PAYSYNC_PROPERTY_OPS=" + strings.Join(ks, ",")
	}
	replay += " go test ./cmd/paysync -run TestReconcile_Property -count=1 -v"
	if len(*r.failures) > r.details {
		r.t.Fatalf("seed %d: %s\n(details: %s)", r.seed, short, replay)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %s\n\noperations (seed %d):\n", r.seed, msg, r.seed)
	for _, s := range r.trace {
		b.WriteString(s)
	}
	if res := runInProcess(r.t, r.env, "batches"); res.code == 0 {
		fmt.Fprintf(&b, "\npaysync batches:\n%s", res.stdout)
	}
	fmt.Fprintf(&b, "\nreplay this seed: %s", replay)
	r.t.Fatal(b.String())
}

func (r *propRun) pick(xs []string) string { return xs[r.rnd.Intn(len(xs))] }

func (r *propRun) randomContent(id string) propContent {
	n, _ := strconv.Atoi(id[1:])
	month := r.pick(propMonths)
	return propContent{
		Emp:   propEmployees[(n-1)%len(propEmployees)], // an id is always the same person
		Date:  fmt.Sprintf("%s-%02d", month, 1+r.rnd.Intn(28)),
		Type:  r.pick(propTypes),
		Hours: r.pick(propHours),
	}
}

// correct changes one of c's hours, type or date (to another month or
// not); month, when given, keeps the date in it.
func (r *propRun) correct(c propContent, month string) propContent {
	for {
		n := c
		switch r.rnd.Intn(3) {
		case 0:
			n.Hours = r.pick(propHours)
		case 1:
			n.Type = r.pick(propTypes)
		default:
			m := month
			if m == "" {
				m = r.pick(propMonths)
			}
			n.Date = fmt.Sprintf("%s-%02d", m, 1+r.rnd.Intn(28))
		}
		if n != c {
			return n
		}
	}
}

func propRowJSON(row propRow) string {
	if row.tomb {
		return fmt.Sprintf(`{"id":%q,"deleted":true}`, row.id)
	}
	c := row.c
	return fmt.Sprintf(`{"id":%q,"employee_id":%q,"date":%q,"hours":%q,"type":%q,"project":%q}`, row.id, c.Emp, c.Date, c.Hours, c.Type, c.month())
}

func (r *propRun) genImport() (propOp, bool) {
	n := 1 + r.rnd.Intn(4)
	ids := slices.Clone(propIDs)
	r.rnd.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	var rows []propRow
	for _, id := range ids[:n] {
		e := r.m.entries[id]
		i := -1
		if e != nil {
			i = r.m.current(e)
		}
		if i < 0 || e.versions[i].tomb {
			rows = append(rows, propRow{id: id, c: r.randomContent(id)})
			continue
		}
		cur := e.versions[i].c
		switch x := r.rnd.Intn(100); {
		case x < 45:
			rows = append(rows, propRow{id: id, c: r.correct(cur, "")})
		case x < 65:
			rows = append(rows, propRow{id: id, c: cur})
		case x < 85:
			rows = append(rows, propRow{id: id, tomb: true})
		default:
			rows = append(rows, propRow{id: id, c: r.randomContent(id)})
		}
	}
	return propOp{kind: "import", rows: rows}, true
}

func (r *propRun) genStatement() (propOp, bool) {
	p := r.pick(propMonths)
	var rows []propRow
	for _, id := range r.m.sortedIDs() {
		e := r.m.entries[id]
		i, ok := r.m.dated(e)
		if !ok || e.versions[i].c.month() != p {
			continue
		}
		switch x := r.rnd.Intn(100); {
		case x < 55:
			rows = append(rows, propRow{id: id, c: e.versions[i].c})
		case x < 75:
			rows = append(rows, propRow{id: id, c: r.correct(e.versions[i].c, p)})
		default: // not listed: gone
		}
	}
	if len(rows) == 0 || r.rnd.Intn(3) == 0 {
		// an entry not of the period yet: new, or moved into it
		for _, id := range r.rnd.Perm(len(propIDs)) {
			id := propIDs[id]
			if slices.ContainsFunc(rows, func(x propRow) bool { return x.id == id }) {
				continue
			}
			c := r.randomContent(id)
			c.Date = fmt.Sprintf("%s-%02d", p, 1+r.rnd.Intn(28))
			rows = append(rows, propRow{id: id, c: c})
			break
		}
	}
	r.rnd.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	return propOp{kind: "statement", rows: rows, period: p}, true
}

func (r *propRun) imports(reverted bool) []*propImport {
	var out []*propImport
	for _, c := range propSorted(mapsKeys(r.m.imports)) {
		im := r.m.imports[c]
		if im.ledgerID != 0 && im.reverted == reverted {
			out = append(out, im)
		}
	}
	return out
}

func mapsKeys[K comparable, V any](m map[K]V) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// propBatch is a batch of `batches --json`.
type propBatch struct {
	ID       int64  `json:"id"`
	ImportID int64  `json:"import_id"`
	State    string `json:"state"`
	ReplayOf int64  `json:"replay_of"`
}

// propBatchDetail is `batches show N --json`.
type propBatchDetail struct {
	propBatch
	Items []struct {
		State     string `json:"state"`
		PayrollID string `json:"payroll_id"`
	} `json:"items"`
}

func (r *propRun) batches() []propBatch {
	res := r.cli("batches", "--json")
	var bs []propBatch
	if err := json.Unmarshal([]byte(res.stdout), &bs); err != nil {
		r.fail(fmt.Sprintf("batches --json: %v\n%s", err, res.stdout))
	}
	return bs
}

func (r *propRun) genRevertBatch() (propOp, bool) {
	bs := r.batches()
	if len(bs) == 0 {
		return propOp{}, false
	}
	act, _ := propPayroll(r.s.sb)
	// mostly a batch with pay parts live in payroll
	var live []propBatch
	for _, b := range bs {
		if b.State == "created" {
			live = append(live, b)
		}
	}
	b := bs[r.rnd.Intn(len(bs))]
	if len(live) > 0 && r.rnd.Intn(5) > 0 {
		b = live[r.rnd.Intn(len(live))]
	}
	res := r.cli("batches", "show", strconv.FormatInt(b.ID, 10), "--json")
	var d propBatchDetail
	if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
		r.fail(fmt.Sprintf("batches show %d --json: %v\n%s", b.ID, err, res.stdout))
	}
	op := propOp{kind: "revert-batch", batch: b.ID, keys: map[string]bool{}}
	for _, it := range d.Items {
		if it.PayrollID == "" || act.ids[it.PayrollID] == "" {
			continue
		}
		k, _, _ := strings.Cut(act.ids[it.PayrollID], " ")
		op.keys[k] = true
		op.live = append(op.live, it.PayrollID+" "+act.ids[it.PayrollID])
	}
	op.note = fmt.Sprintf("batch %d (import %d, state %s) holds in payroll: %s", b.ID, b.ImportID, b.State, strings.Join(op.live, ", "))
	if len(op.live) == 0 {
		op.note = fmt.Sprintf("batch %d (import %d, state %s) holds nothing live in payroll", b.ID, b.ImportID, b.State)
	}
	return op, true
}

func (r *propRun) genReplayBatch() (propOp, bool) {
	var cands []int64
	var why []string
	for _, id := range propSorted(mapsKeys(r.m.revertedBatches)) {
		cands = append(cands, id)
		why = append(why, fmt.Sprintf("batch %d reverted by revert BATCH", id))
	}
	bs := r.batches()
	// batches of imports reverted since: the model holds no exclusion for
	// them, a replay must not pay their entries
	rev := map[int64]bool{}
	for _, im := range r.imports(true) {
		rev[im.ledgerID] = true
	}
	for _, b := range bs {
		if rev[b.ImportID] && !r.m.revertedBatches[b.ID] {
			cands = append(cands, b.ID)
			why = append(why, fmt.Sprintf("batch %d of reverted import %d", b.ID, b.ImportID))
		}
	}
	if len(cands) == 0 || r.rnd.Intn(8) == 0 {
		if len(bs) == 0 {
			return propOp{}, false
		}
		b := bs[r.rnd.Intn(len(bs))]
		return propOp{kind: "replay-batch", batch: b.ID, note: fmt.Sprintf("batch %d (state %s)", b.ID, b.State)}, true
	}
	i := r.rnd.Intn(len(cands))
	return propOp{kind: "replay-batch", batch: cands[i], note: why[i]}, true
}

func (r *propRun) gen(kind string) (propOp, bool) {
	switch kind {
	case "import":
		return r.genImport()
	case "statement":
		return r.genStatement()
	case "revert-import":
		ims := r.imports(false)
		if len(ims) == 0 {
			return propOp{}, false
		}
		im := ims[r.rnd.Intn(len(ims))]
		return propOp{kind: kind, imp: im.clock}, true
	case "replay-import":
		ims := r.imports(true)
		if len(ims) == 0 {
			return propOp{}, false
		}
		im := ims[r.rnd.Intn(len(ims))]
		return propOp{kind: kind, imp: im.clock}, true
	case "revert-batch":
		return r.genRevertBatch()
	case "replay-batch":
		return r.genReplayBatch()
	case "revert-period", "replay-period":
		return propOp{kind: kind, period: r.pick(propMonths)}, true
	case "close":
		var open []string
		for _, p := range propMonths {
			if r.m.closed[p] == nil {
				open = append(open, p)
			}
		}
		if len(open) == 0 {
			return propOp{}, false
		}
		return propOp{kind: kind, period: r.pick(open)}, true
	case "open":
		var closed []string
		for _, p := range propMonths {
			if r.m.closed[p] != nil {
				closed = append(closed, p)
			}
		}
		if len(closed) == 0 {
			return propOp{}, false
		}
		return propOp{kind: kind, period: r.pick(closed)}, true
	case "rules":
		v := (r.m.variant + 1 + r.rnd.Intn(len(propVariants)-1)) % len(propVariants)
		return propOp{kind: kind, variant: v, period: r.pick(propMonths)}, true
	}
	panic(kind)
}

var propWeights = map[string]int{
	"import": 28, "statement": 8, "revert-import": 10, "replay-import": 7, "revert-batch": 9, "replay-batch": 8,
	"revert-period": 5, "replay-period": 5, "close": 6, "open": 7, "rules": 5,
}

// next draws an operation the model pins down.
func (r *propRun) next() (propOp, bool) {
	total := 0
	for _, k := range propOpKinds {
		if r.allowed[k] {
			total += propWeights[k]
		}
	}
	for try := 0; try < 50; try++ {
		x := r.rnd.Intn(total)
		var kind string
		for _, k := range propOpKinds {
			if !r.allowed[k] {
				continue
			}
			if x < propWeights[k] {
				kind = k
				break
			}
			x -= propWeights[k]
		}
		op, ok := r.gen(kind)
		if !ok {
			continue
		}
		before, check := r.m, op
		after := r.m.clone()
		after.apply(op, false)
		if op.kind == "rules" {
			// a rules change alone changes nothing: the replay --period
			// that follows it is the step to look at
			check = propOp{kind: "replay-period", period: op.period}
			before, after = after, after.clone()
			after.apply(check, false)
		}
		if why := propAmbiguous(before, after, check); why != "" {
			r.t.Logf("seed %d: not generated (model.md leaves it open): %s: %s", r.seed, op.kind, why)
			continue
		}
		return op, true
	}
	return propOp{}, false
}

// exec carries op out through the CLI and applies it to the model.
func (r *propRun) exec(step int, op propOp) {
	var outcome result
	refused := false
	var tr strings.Builder
	switch op.kind {
	case "import", "statement":
		r.files++
		name := fmt.Sprintf("import-%03d.ndjson", r.files)
		path := filepath.Join(r.dir, name)
		var lines []string
		for _, row := range op.rows {
			lines = append(lines, propRowJSON(row))
		}
		// Trailing spaces make every file's bytes unique: the same file
		// twice is another question (the same content hash).
		content := strings.Join(lines, "\n") + strings.Repeat(" ", r.files) + "\n"
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			r.t.Fatal(err)
		}
		op.args = []string{"import", "--format", "ndjson", "--source", "ts"}
		if op.kind == "statement" {
			op.args = append(op.args, "--period", op.period)
		}
		op.args = append(op.args, name)
		fmt.Fprintf(&tr, "%3d. %s   # import #%d\n", step, op, r.m.clock+1)
		for _, l := range lines {
			fmt.Fprintf(&tr, "       | %s\n", l)
		}
		args := slices.Clone(op.args)
		args[len(args)-1] = path
		outcome = r.cli(args...)
	case "revert-import", "replay-import":
		im := r.m.imports[op.imp]
		verb := strings.TrimSuffix(op.kind, "-import")
		op.args = []string{verb, "--import", strconv.FormatInt(im.ledgerID, 10), "--yes"}
		op.note = fmt.Sprintf("import #%d (%s)", op.imp, im.file)
		fmt.Fprintf(&tr, "%3d. %s\n", step, op)
		outcome = r.cli(op.args...)
	case "revert-batch", "replay-batch":
		op.args = []string{strings.TrimSuffix(op.kind, "-batch"), strconv.FormatInt(op.batch, 10), "--yes"}
		fmt.Fprintf(&tr, "%3d. %s\n", step, op)
		outcome = r.cli(op.args...)
	case "revert-period", "replay-period":
		op.args = []string{strings.TrimSuffix(op.kind, "-period"), "--period", op.period, "--yes"}
		fmt.Fprintf(&tr, "%3d. %s\n", step, op)
		outcome = r.cli(op.args...)
		if outcome.code != 0 && r.m.closed[op.period] != nil && strings.Contains(outcome.stdout+outcome.stderr, "reopen it first") {
			refused = true
		}
	case "close", "open":
		op.args = []string{"periods", op.kind, op.period}
		fmt.Fprintf(&tr, "%3d. %s\n", step, op)
		outcome = r.cli(op.args...)
	case "rules":
		if err := os.WriteFile(r.rules, []byte(propRulesYAML(op.variant)), 0o600); err != nil {
			r.t.Fatal(err)
		}
		op.args = []string{"(rules file: " + propVariants[op.variant].name + ")"}
		fmt.Fprintf(&tr, "%3d. rules change: %s\n", step, propVariants[op.variant].name)
	}
	r.last, r.lastRefused = outcome, refused
	fmt.Fprintf(&tr, "       → exit %d", outcome.code)
	if refused {
		tr.WriteString(" (refused for the closed period: taken as not done)")
	}
	tr.WriteString("\n")
	for _, l := range strings.Split(strings.TrimSpace(outcome.stdout+outcome.stderr), "\n") {
		if l != "" && !strings.HasPrefix(l, `{"time"`) {
			fmt.Fprintf(&tr, "       > %s\n", l)
		}
	}
	r.trace = append(r.trace, tr.String())

	r.m.apply(op, refused)
	switch op.kind {
	case "import", "statement":
		im := r.m.imports[r.m.clock]
		im.file = op.args[len(op.args)-1]
		im.ledgerID = r.ledgerImport(im.file)
		if im.ledgerID == 0 {
			r.trace = append(r.trace, fmt.Sprintf("       (the ledger records no import of %s: it cannot be reverted)\n", im.file))
		} else {
			r.trace[len(r.trace)-1] = strings.Replace(r.trace[len(r.trace)-1], fmt.Sprintf("# import #%d\n", im.clock), fmt.Sprintf("# import #%d = ledger import %d\n", im.clock, im.ledgerID), 1)
		}
	case "close":
		if outcome.code == 0 {
			act, _ := propPayroll(r.s.sb)
			fr := &propFrozen{parts: map[string]string{}, counting: map[string]string{}}
			for id, ku := range act.ids {
				k, _, _ := strings.Cut(ku, " ")
				if propKeyMonth(k) == op.period {
					fr.parts[id] = ku
				}
			}
			for id, e := range r.m.entries {
				if v, ok := r.m.counting(e); ok && v.c.month() == op.period {
					fr.counting[id] = op.period
				}
			}
			r.m.closed[op.period] = fr
		}
	case "open":
		if outcome.code == 0 {
			r.catchingUp[op.period] = step
		}
	case "rules":
		r.check(step, op)
		// the rules change is followed by replay --period
		r.exec(step, propOp{kind: "replay-period", period: op.period, note: "after the rules change"})
		return
	}
	r.check(step, op)
}

// propLastLine is the last line of res's output that is not a JSON log line.
func propLastLine(res result) string {
	lines := strings.Split(strings.TrimSpace(res.stdout+"\n"+res.stderr), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, `{"time"`) {
			return l
		}
	}
	return ""
}

// ledgerImport is the ledger's id of the file import named name.
func (r *propRun) ledgerImport(name string) int64 {
	res := r.cli("imports", "--json")
	var ims []struct {
		ID   int64  `json:"id"`
		Kind string `json:"kind"`
		Name string `json:"name"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &ims); err != nil {
		r.fail(fmt.Sprintf("imports --json: %v\n%s", err, res.stdout))
	}
	var id int64
	for _, im := range ims {
		if im.Kind == "file" && filepath.Base(im.Name) == name && im.ID > id {
			id = im.ID
		}
	}
	return id
}

// check compares payroll with the model after step.
func (r *propRun) check(step int, op propOp) {
	act, foreign := propPayroll(r.s.sb)
	want, why := r.m.desired()
	var diffs []string
	if len(foreign) > 0 {
		diffs = append(diffs, fmt.Sprintf("pay parts in other companies than Nordlys: %v", foreign))
	}
	keys := map[string]bool{}
	for k := range act.total {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	for _, month := range propMonths {
		if fr := r.m.closed[month]; fr != nil {
			var changed []string
			for id, ku := range fr.parts {
				if act.ids[id] != ku {
					changed = append(changed, fmt.Sprintf("%s (%s) is gone", id, ku))
				}
			}
			for id, ku := range act.ids {
				k, _, _ := strings.Cut(ku, " ")
				if propKeyMonth(k) == month && fr.parts[id] == "" {
					changed = append(changed, fmt.Sprintf("%s (%s) was created", id, ku))
				}
			}
			if len(changed) > 0 {
				sort.Strings(changed)
				diffs = append(diffs, fmt.Sprintf("closed period %s changed since it was closed: %s", month, strings.Join(changed, "; ")))
			}
		}
	}
	// A period opened again is caught up by the next reconcile: the next
	// command that imports, reverts or replays (an operation refused for a
	// closed period changes nothing, and does not reconcile either).
	reconciles := op.kind != "open" && op.kind != "close" && op.kind != "rules" && !r.lastRefused
	caught := map[string]int{}
	for p, at := range r.catchingUp {
		if reconciles {
			caught[p] = at
			delete(r.catchingUp, p)
		}
	}
	for _, k := range propSorted(mapsKeys(keys)) {
		month := propKeyMonth(k)
		if r.m.closed[month] != nil || r.catchingUp[month] != 0 {
			continue // compared with the frozen pay parts above, or not reconciled since it was opened
		}
		if month == "?" || !act.total[k].Equal(want[k]) {
			w := "0 (no entry counts)"
			if _, ok := want[k]; ok {
				w = fmt.Sprintf("%s from %s", want[k], strings.Join(why[k], ", "))
			}
			if at := caught[month]; at != 0 {
				w += fmt.Sprintf(" (%s was opened again at step %d: this is the first reconcile since, which catches it up to the desired state)", month, at)
			}
			diffs = append(diffs, fmt.Sprintf("group %s: payroll holds %s in %d pay parts %v, the model wants %s", k, act.total[k], len(act.parts[k]), act.parts[k], w))
		}
	}
	if len(diffs) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "after step %d (paysync %s", step, strings.Join(op.args, " "))
	if r.last.code != 0 {
		fmt.Fprintf(&b, ": exit %d, %q", r.last.code, propLastLine(r.last))
	}
	b.WriteString(") payroll differs from the model:\n")
	for _, d := range diffs {
		fmt.Fprintf(&b, "  - %s\n", d)
	}
	b.WriteString("\nthe model's entries (versions: import#clock[R = reverted] content; exclusions):\n")
	for _, id := range r.m.sortedIDs() {
		e := r.m.entries[id]
		var vs []string
		for _, v := range e.versions {
			s := fmt.Sprintf("#%d", v.imp)
			if r.m.imports[v.imp].reverted {
				s += "R"
			}
			if v.tomb {
				s += " deleted"
			} else {
				s += fmt.Sprintf(" %s %s %s %sh [%s]", v.c.Emp, v.c.Date, v.c.Type, v.c.Hours, propVariants[v.variant].name)
			}
			vs = append(vs, s)
		}
		state := "does not count"
		if v, ok := r.m.counting(e); ok {
			state = "counts in " + propLine(v)
		}
		fmt.Fprintf(&b, "  %s: %s; excl %v; %s\n", id, strings.Join(vs, " | "), e.excl, state)
	}
	var closed []string
	for _, p := range propMonths {
		if r.m.closed[p] != nil {
			closed = append(closed, p)
		}
	}
	fmt.Fprintf(&b, "  closed periods: %v; rules: %s\n", closed, propVariants[r.m.variant].name)
	r.fail(b.String())
}

func propEnvList(t *testing.T) []int64 {
	spec := os.Getenv("PAYSYNC_PROPERTY_SEEDS")
	if spec == "" {
		spec = "1-20"
	}
	var seeds []int64
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if a, b, ok := strings.Cut(part, "-"); ok {
			lo, err1 := strconv.ParseInt(a, 10, 64)
			hi, err2 := strconv.ParseInt(b, 10, 64)
			if err1 != nil || err2 != nil || hi < lo {
				t.Fatalf("PAYSYNC_PROPERTY_SEEDS: bad range %q", part)
			}
			for s := lo; s <= hi; s++ {
				seeds = append(seeds, s)
			}
			continue
		}
		s, err := strconv.ParseInt(part, 10, 64)
		if err != nil {
			t.Fatalf("PAYSYNC_PROPERTY_SEEDS: bad seed %q", part)
		}
		seeds = append(seeds, s)
	}
	return seeds
}

func TestReconcile_Property(t *testing.T) {
	seeds := propEnvList(t)
	steps := 25
	if s := os.Getenv("PAYSYNC_PROPERTY_STEPS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("PAYSYNC_PROPERTY_STEPS: %q", s)
		}
		steps = n
	}
	allowed := map[string]bool{}
	for _, k := range propOpKinds {
		allowed[k] = true
	}
	if s := os.Getenv("PAYSYNC_PROPERTY_OPS"); s != "" {
		clear(allowed)
		for _, k := range strings.Split(s, ",") {
			k = strings.TrimSpace(k)
			if !slices.Contains(propOpKinds, k) {
				t.Fatalf("PAYSYNC_PROPERTY_OPS: unknown operation %q (known: %s)", k, strings.Join(propOpKinds, " "))
			}
			allowed[k] = true
		}
	}
	details := 3
	if s := os.Getenv("PAYSYNC_PROPERTY_DETAILS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			t.Fatalf("PAYSYNC_PROPERTY_DETAILS: %q", s)
		}
		details = n
	}
	budget := 40 * time.Second
	if raceEnabled {
		budget = 20 * time.Second // the suite's time: a few seeds under the race detector, all of them without
	}
	if s := os.Getenv("PAYSYNC_PROPERTY_BUDGET"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("PAYSYNC_PROPERTY_BUDGET: %v", err)
		}
		budget = d
	}
	start := time.Now()
	var failures []string
	defer func() {
		if len(failures) > 0 {
			t.Errorf("%d of the seeds run fail (the first %d print their operations above):\n%s", len(failures), min(details, len(failures)), strings.Join(failures, "\n"))
		}
	}()
	for i, seed := range seeds {
		if time.Since(start) > budget {
			t.Logf("time budget %s spent: seeds %v not run", budget, seeds[i:])
			break
		}
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			propRunSeed(t, seed, steps, allowed, &failures, details)
		})
	}
}

func propRunSeed(t *testing.T, seed int64, steps int, allowed map[string]bool, failures *[]string, details int) {
	s := startSandbox(t, sandbox.Options{})
	dir := t.TempDir()
	r := &propRun{t: t, seed: seed, rnd: rand.New(rand.NewSource(seed)), s: s, dir: dir, rules: filepath.Join(dir, "rules.yaml"), m: newPropModel(), allowed: allowed, failures: failures, details: details, catchingUp: map[string]int{}}
	if err := os.WriteFile(r.rules, []byte(propRulesYAML(0)), 0o600); err != nil {
		t.Fatal(err)
	}
	r.env = with(s.env, "PAYSYNC_LEDGER", filepath.Join(dir, "ledger.db"), "PAYSYNC_MAPPING", r.rules)
	// Start from some entries so that the first operations have work.
	first := 0
	if allowed["import"] {
		op, _ := r.genImport()
		first++
		r.exec(first, op)
	}
	for step := first + 1; step <= steps; step++ {
		op, ok := r.next()
		if !ok {
			t.Logf("seed %d: step %d: no operation the model pins down", seed, step)
			continue
		}
		r.exec(step, op)
	}
	t.Logf("seed %d: %d steps, payroll matched the model after each", seed, steps)
}

func propSorted[K int | int64 | string](xs []K) []K {
	slices.Sort(xs)
	return xs
}
