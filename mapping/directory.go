package mapping

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/paysync/paysync"
)

// Directory is what mapping needs from the payroll system: the pay codes
// and a company's employees. *payroll.Client satisfies it.
type Directory interface {
	PayPartsMeta(ctx context.Context) ([]paysync.PayPartMeta, error)
	Employees(ctx context.Context, companyID string, employeeIDs []string) ([]paysync.Employee, error)
}

// Cache fetches meta once and each company's employees once.
type Cache struct {
	dir Directory

	mu          sync.Mutex
	meta        map[string]paysync.PayPartMeta
	metaFetched time.Time
	order       []string
	emps        map[string]*companyEmployees
}

type companyEmployees struct {
	byID     map[string]paysync.Employee
	byName   map[string][]paysync.Employee // folded name → employees
	byNumber map[string][]paysync.Employee // payroll's employee number → employees
	byEmail  map[string][]paysync.Employee // folded payroll e-mail → employees
	err      error
	fetched  time.Time     // when the read began
	done     time.Time     // when it ended
	ready    chan struct{} // closed when the read is done (byID, byName, err, done set)
}

// failFastFor is how long a transient failure to read a company's
// employees is given again to lookups of that company without asking
// payroll: during an outage, entry after entry of the company does not
// each wait for its own failing read (retried inside the client, honouring
// Retry-After). It is an error, never a verdict: the entry is retried.
const failFastFor = 2 * time.Second

// refreshAfter is how old a company's employee list must be before a miss
// fetches it again (a new hire in a long-running daemon).
const refreshAfter = 30 * time.Second

// refresh drops a company's cached employees if they are older than
// refreshAfter, so that the next lookup fetches them again. It reports
// whether it did.
func (c *Cache) refresh(companyID string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ce, ok := c.emps[companyID]
	if !ok || time.Since(ce.fetched) < refreshAfter {
		return false
	}
	delete(c.emps, companyID)
	return true
}

// NewCache wraps dir.
func NewCache(dir Directory) *Cache {
	return &Cache{dir: dir, emps: map[string]*companyEmployees{}}
}

// Meta returns the pay code table, fetched on first use.
func (c *Cache) Meta(ctx context.Context) (map[string]paysync.PayPartMeta, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.meta != nil {
		return c.meta, nil
	}
	ms, err := c.dir.PayPartsMeta(ctx)
	if err != nil {
		return nil, err
	}
	c.meta, c.order, c.metaFetched = make(map[string]paysync.PayPartMeta, len(ms)), nil, time.Now()
	for _, m := range ms {
		c.meta[m.Code] = m
		c.order = append(c.order, m.Code)
	}
	return c.meta, nil
}

// refreshMeta drops the pay code table if it is older than refreshAfter,
// so that the next Meta fetches it again (a code added in payroll while
// the daemon runs). It reports whether it did.
func (c *Cache) refreshMeta() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.meta == nil || time.Since(c.metaFetched) < refreshAfter {
		return false
	}
	c.meta = nil
	return true
}

// Codes lists the known codes in the server's order (after Meta).
func (c *Cache) Codes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.order...)
}

// company returns a company's employees, read on first use; concurrent
// lookups of a company share one read, outside the cache's lock. Only a
// company payroll does not know (paysync.ErrCompanyNotFound) is kept as an
// answer, until refreshAfter, so that one unknown company costs one read,
// not one per entry. Any other failure (an outage, a revoked connection)
// is not the entry's fault: it is given again only for failFastFor, as the
// transient error it is, and then read again.
func (c *Cache) company(ctx context.Context, companyID string) (*companyEmployees, error) {
	for {
		c.mu.Lock()
		ce, ok := c.emps[companyID]
		if !ok {
			ce = &companyEmployees{byID: map[string]paysync.Employee{}, byName: map[string][]paysync.Employee{},
				byNumber: map[string][]paysync.Employee{}, byEmail: map[string][]paysync.Employee{}, fetched: time.Now(), ready: make(chan struct{})}
			c.emps[companyID] = ce
			c.mu.Unlock()
			return ce, c.read(ctx, companyID, ce)
		}
		c.mu.Unlock()
		select {
		case <-ce.ready:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		hold := failFastFor
		if errors.Is(ce.err, paysync.ErrCompanyNotFound) {
			hold = refreshAfter
		}
		if ce.err == nil || time.Since(ce.done) < hold {
			return ce, ce.err
		}
		c.forget(companyID, ce)
	}
}

// read fills ce from payroll and marks it ready.
func (c *Cache) read(ctx context.Context, companyID string, ce *companyEmployees) error {
	defer close(ce.ready)
	emps, err := c.dir.Employees(ctx, companyID, nil)
	ce.done = time.Now()
	if err != nil {
		ce.err = err
		if ctx.Err() != nil { // this caller gave up: not an answer for others
			c.forget(companyID, ce)
		}
		return err
	}
	for _, e := range emps {
		ce.byID[e.ID] = e
		k := fold(e.Name)
		ce.byName[k] = append(ce.byName[k], e)
		if n := strings.TrimSpace(e.Number); n != "" {
			ce.byNumber[n] = append(ce.byNumber[n], e)
		}
		if k := fold(e.Email); k != "" {
			ce.byEmail[k] = append(ce.byEmail[k], e)
		}
	}
	return nil
}

// forget drops ce if it is still the company's entry.
func (c *Cache) forget(companyID string, ce *companyEmployees) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.emps[companyID] == ce {
		delete(c.emps, companyID)
	}
}

// resolve finds the entry's person among the company's employees, in this
// order (README "Matching people"):
//
//  1. employee_id on the entry: payroll's id, as given;
//  2. the operator's tables: employees.by_number, by_email, by_name;
//  3. payroll's own employee numbers, then its e-mails, then (with
//     employees.match_names) the exact name.
//
// An explicit answer (1, 2) is final: its employee must be in the company.
// Of the automatic ones (3), every one the entry has must agree, so a
// source whose numbers are its own cannot pay someone else whose payroll
// number they happen to be: a disagreement is a problem naming both. A
// miss says which matches were tried.
func (m *Mapper) resolve(ctx context.Context, e paysync.Entry, l *Line, prob func(string, string, string) *Problem) error {
	ce, err := m.cache.company(ctx, l.CompanyID)
	switch {
	case errors.Is(err, paysync.ErrCompanyNotFound):
		return prob("company_id", fmt.Sprintf("company %s: %v", l.CompanyID, err), "check the company id (paysync companies lists them)")
	case err != nil:
		// Payroll could not say: not the entry's fault, so not a Problem.
		return fmt.Errorf("read employees of company %s: %w", l.CompanyID, err)
	}
	er := m.rules.Employees
	id, field, via := "", "", ""
	switch {
	case e.EmployeeID != "":
		id, field, via = e.EmployeeID, "employee_id", "as given"
	case e.EmployeeNumber != "" && er.ByNumber[e.EmployeeNumber] != "":
		id, field, via = er.ByNumber[e.EmployeeNumber], "employee_number", "employees.by_number"
	case e.Email != "" && er.ByEmail[fold(e.Email)] != "":
		id, field, via = er.ByEmail[fold(e.Email)], "email", "employees.by_email"
	case e.Name != "" && er.ByName[fold(e.Name)] != "":
		id, field, via = er.ByName[fold(e.Name)], "name", "employees.by_name"
	}
	if id != "" {
		emp, ok := ce.byID[id]
		if !ok {
			return prob(field, fmt.Sprintf("employee %s (%s) is not in company %s", id, via, l.CompanyID), "check the employee id (paysync employees --company "+l.CompanyID+" lists them)")
		}
		l.EmployeeID, l.EmployeeName = emp.ID, emp.Name
		return nil
	}

	var tried []string
	for _, t := range []struct{ have, table string }{{e.EmployeeNumber, "by_number"}, {e.Email, "by_email"}, {e.Name, "by_name"}} {
		if t.have != "" {
			tried = append(tried, "employees."+t.table)
		}
	}
	var hits []personHit
	// auto tries one of payroll's own keys; it returns a problem only for
	// a key that names several employees.
	auto := func(field, what, key string, idx map[string][]paysync.Employee, none string) error {
		ms := idx[key]
		switch {
		case len(idx) == 0:
			tried = append(tried, none)
		case len(ms) == 0:
			tried = append(tried, fmt.Sprintf("%s (none is %s)", what, key))
		case len(ms) == 1:
			hits = append(hits, personHit{field, what, key, ms[0]})
		default:
			if hit, ok := agreeing(hits, ms); ok {
				hits = append(hits, personHit{field, what, key, hit})
				break
			}
			return prob(field, fmt.Sprintf("%s: %s is held by %d employees of company %s: %s", what, key, len(ms), l.CompanyID, employeeIDs(ms)),
				"map this person explicitly in employees.by_email, by_number or by_name")
		}
		return nil
	}
	if n := strings.TrimSpace(e.EmployeeNumber); n != "" {
		if err := auto("employee_number", "payroll's employee numbers", n, ce.byNumber,
			fmt.Sprintf("payroll's employee numbers (payroll gives none for company %s; if the server has them under another name, set PAYSYNC_EMPLOYEE_NUMBER_FIELD)", l.CompanyID)); err != nil {
			return err
		}
	}
	if e.Email != "" {
		if err := auto("email", "payroll's e-mails", fold(e.Email), ce.byEmail,
			fmt.Sprintf("payroll's e-mails (payroll gives none for company %s)", l.CompanyID)); err != nil {
			return err
		}
	}
	if e.Name != "" {
		ms := ce.byName[fold(e.Name)]
		hit, agrees := agreeing(hits, ms)
		switch {
		case !er.MatchNames:
			tried = append(tried, "exact name (off: employees.match_names is false)")
		case len(ms) == 0:
			tried = append(tried, fmt.Sprintf("exact name (no employee of company %s is named %q)", l.CompanyID, e.Name))
		case len(ms) == 1 || agrees:
			hits = append(hits, personHit{"name", "name", e.Name, hit})
		case len(hits) == 0:
			return prob("name", fmt.Sprintf("%q matches %d employees of company %s: %s", e.Name, len(ms), l.CompanyID, employeeIDs(ms)), "map this person explicitly in employees.by_email, by_number or by_name")
		default:
			hits = append(hits, personHit{"name", "name", e.Name, ms[0]}) // disagrees: reported below
		}
	}
	if len(hits) == 0 {
		field = "employee"
		if e.Email != "" {
			field = "email"
		} else if e.Name != "" {
			field = "name"
		} else if e.EmployeeNumber != "" {
			field = "employee_number"
		}
		return prob(field, fmt.Sprintf("no payroll employee for %q: tried %s", e.Employee(), strings.Join(tried, ", ")), m.personHint(e))
	}
	for _, h := range hits[1:] {
		if h.emp.ID != hits[0].emp.ID {
			return prob(hits[0].field, fmt.Sprintf("the matches disagree: %s is %s but %s is %s", hits[0], hits[0].who(), h, h.who()),
				"map this person explicitly in employees.by_number, by_email or by_name")
		}
	}
	l.EmployeeID, l.EmployeeName = hits[0].emp.ID, hits[0].emp.Name
	return nil
}

// personHit is one automatic match of an entry's person.
type personHit struct {
	field, what, key string // entry field, payroll's key ("payroll's e-mails"), the entry's value
	emp              paysync.Employee
}

func (h personHit) String() string {
	switch h.field {
	case "employee_number":
		return "payroll number " + h.key
	case "email":
		return "e-mail " + h.key
	}
	return fmt.Sprintf("name %q", h.key)
}

func (h personHit) who() string { return fmt.Sprintf("%s (%s)", h.emp.ID, h.emp.Name) }

// agreeing returns the one of ms that the earlier hits found, if any.
func agreeing(hits []personHit, ms []paysync.Employee) (paysync.Employee, bool) {
	if len(ms) == 1 {
		return ms[0], len(hits) == 0 || hits[0].emp.ID == ms[0].ID
	}
	for _, m := range ms {
		if len(hits) > 0 && hits[0].emp.ID == m.ID {
			return m, true
		}
	}
	return paysync.Employee{}, false
}

// employeeIDs lists the employees' ids, sorted, for messages.
func employeeIDs(es []paysync.Employee) string {
	ids := make([]string, len(es))
	for i, e := range es {
		ids[i] = e.ID
	}
	sort.Strings(ids)
	return strings.Join(ids, ", ")
}

func (m *Mapper) personHint(e paysync.Entry) string {
	src := m.rules.Source
	if src == "" {
		return "give employee_id on the entry, or map the person in a rules file (employees.by_email / by_number / by_name), or list them in employees.ignore"
	}
	switch {
	case e.Email != "":
		return "add " + e.Email + " to employees.by_email in " + src + ", or to employees.ignore"
	case e.EmployeeNumber != "":
		return "add " + e.EmployeeNumber + " to employees.by_number in " + src + " (paysync employees lists payroll's own numbers), or to employees.ignore"
	}
	return "add the name to employees.by_name in " + src + " (or turn on employees.match_names), or to employees.ignore"
}
