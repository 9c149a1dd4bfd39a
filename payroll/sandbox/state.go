package sandbox

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/paysync/paysync"
)

// State is a deep copy of the sandbox's data and counters.
type State struct {
	Companies []CompanyState `json:"companies"` // in fixture order
	Counters  Counters       `json:"counters"`
}

// CompanyState is one company as the sandbox holds it.
type CompanyState struct {
	ID        string             `json:"id"`
	Name      string             `json:"name"`
	Owner     string             `json:"owner"` // username
	Employees []paysync.Employee `json:"employees"`
	PayParts  []paysync.PayPart  `json:"pay_parts"` // creation order, EmployeeName filled
}

// Counters count what the sandbox served, for tests and benchmarks.
type Counters struct {
	TokenGrants map[string]int `json:"token_grants"` // by grant_type, successful only
	TokenErrors map[string]int `json:"token_errors"` // by OAuth error code
	// Requests counts GraphQL requests by the root field of the operation
	// ("create_pay_parts", "companies", "__schema", ...) once graph-gophers
	// starts resolving them: requests rejected by parsing or validation,
	// by the bearer check or by a fault that answers before execution are
	// not counted.
	Requests     map[string]int    `json:"requests"`
	Unauthorized int               `json:"unauthorized"` // 401s served on /graphql
	Faults       map[FaultKind]int `json:"faults"`       // fired faults by kind
}

func newCounters() Counters {
	return Counters{
		TokenGrants: map[string]int{},
		TokenErrors: map[string]int{},
		Requests:    map[string]int{},
		Faults:      map[FaultKind]int{},
	}
}

func (c Counters) clone() Counters {
	return Counters{
		TokenGrants:  cloneMap(c.TokenGrants),
		TokenErrors:  cloneMap(c.TokenErrors),
		Requests:     cloneMap(c.Requests),
		Unauthorized: c.Unauthorized,
		Faults:       cloneMap(c.Faults),
	}
}

func cloneMap[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// company is one payroll company with its employees and pay parts.
type company struct {
	id, name, owner string
	employees       []paysync.Employee
	payParts        []paysync.PayPart // creation order
}

func (c *company) employee(id string) (paysync.Employee, bool) {
	for _, e := range c.employees {
		if e.ID == id {
			return e, true
		}
	}
	return paysync.Employee{}, false
}

// store holds the payroll data. Every method takes the lock itself and
// hands out copies, so resolvers running in parallel never share slices.
type store struct {
	mu        sync.RWMutex
	companies []*company
	meta      []paysync.PayPartMeta
	seq       int // global pay part sequence
	onCreate  func(companyID string, created []paysync.PayPart)
}

func newStore(fixtureUser string, extra, employees int) *store {
	cs := fixtureCompanies(fixtureUser)
	for i := 1; i <= extra; i++ {
		c := &company{id: LoadCompanyID(i), name: "Load company " + strconv.Itoa(i), owner: fixtureUser}
		for j := 1; j <= employees; j++ {
			c.employees = append(c.employees, paysync.Employee{ID: LoadEmployeeID(i, j), Name: fmt.Sprintf("Load employee %d.%d", i, j), Number: fmt.Sprintf("%d%03d", i, j)})
		}
		cs = append(cs, c)
	}
	return &store{companies: cs, meta: FixtureMeta()}
}

// LoadCompanyID is the id of generated company i (1-based, see
// Options.ExtraCompanies): base64 of "2_i".
func LoadCompanyID(i int) string {
	return base64.StdEncoding.EncodeToString([]byte("2_" + strconv.Itoa(i)))
}

// LoadEmployeeID is the id of employee j of generated company i: base64
// of "2_i_j".
func LoadEmployeeID(i, j int) string {
	return base64.StdEncoding.EncodeToString([]byte("2_" + strconv.Itoa(i) + "_" + strconv.Itoa(j)))
}

// errNotFound is wrapped by lookups of unknown or invisible companies.
var errNotFound = errors.New("not found")

// apiError is an error served to GraphQL clients with extensions; it is
// returned unwrapped because graph-gophers looks for Extensions by a plain
// type assertion.
type apiError struct {
	msg   string
	code  string // VALIDATION_ERROR, NOT_FOUND
	index int    // index into the input list, or -1
	field string // input field, or ""
}

func (e *apiError) Error() string { return e.msg }

// Extensions implements graph-gophers' extensions interface.
func (e *apiError) Extensions() map[string]any {
	m := map[string]any{"code": e.code}
	if e.index >= 0 {
		m["index"] = e.index
	}
	if e.field != "" {
		m["field"] = e.field
	}
	return m
}

func (e *apiError) Is(target error) bool { return target == errNotFound && e.code == "NOT_FOUND" }

func companyNotFound(id string) *apiError {
	return &apiError{msg: fmt.Sprintf("company %s not found", id), code: "NOT_FOUND", index: -1}
}

func invalidItem(index int, field, format string, args ...any) *apiError {
	return &apiError{
		msg:   fmt.Sprintf("pay_parts[%d]: ", index) + fmt.Sprintf(format, args...),
		code:  "VALIDATION_ERROR",
		index: index,
		field: field,
	}
}

// visible returns the company if user owns it. The caller holds the lock.
func (st *store) visible(user, id string) (*company, bool) {
	for _, c := range st.companies {
		if c.id == id && owns(user, c.owner, c.id) {
			return c, true
		}
	}
	return nil, false
}

// companyView is a read-only copy of a company's identity.
type companyView struct{ id, name string }

// companiesOf returns the companies user owns in fixture order, restricted
// to ids when ids is not nil.
func (st *store) companiesOf(user string, ids []string) []companyView {
	st.mu.RLock()
	defer st.mu.RUnlock()
	var out []companyView
	for _, c := range st.companies {
		if !owns(user, c.owner, c.id) || (ids != nil && !slices.Contains(ids, c.id)) {
			continue
		}
		out = append(out, companyView{c.id, c.name})
	}
	return out
}

// employees returns the company's employees, restricted to ids when ids is
// not nil.
func (st *store) employees(companyID string, ids []string) []paysync.Employee {
	st.mu.RLock()
	defer st.mu.RUnlock()
	var out []paysync.Employee
	for _, c := range st.companies {
		if c.id != companyID {
			continue
		}
		for _, e := range c.employees {
			if ids == nil || slices.Contains(ids, e.ID) {
				out = append(out, paysync.Employee{ID: e.ID, Name: e.Name, Number: e.Number, Email: e.Email})
			}
		}
	}
	return out
}

// payParts returns a copy of the company's pay parts, of one employee when
// employeeID is not "".
func (st *store) payParts(companyID, employeeID string) []paysync.PayPart {
	st.mu.RLock()
	defer st.mu.RUnlock()
	var out []paysync.PayPart
	for _, c := range st.companies {
		if c.id != companyID {
			continue
		}
		for _, p := range c.payParts {
			if employeeID == "" || p.EmployeeID == employeeID {
				out = append(out, p)
			}
		}
	}
	return out
}

// visiblePayParts is payParts after a visibility check.
func (st *store) visiblePayParts(user, companyID string) ([]paysync.PayPart, error) {
	st.mu.RLock()
	_, ok := st.visible(user, companyID)
	st.mu.RUnlock()
	if !ok {
		return nil, companyNotFound(companyID)
	}
	return st.payParts(companyID, ""), nil
}

func (st *store) metaFor(code string) (paysync.PayPartMeta, bool) {
	for _, m := range st.meta {
		if m.Code == code {
			return m, true
		}
	}
	return paysync.PayPartMeta{}, false
}

func (st *store) nextID() string {
	st.seq++
	return base64.StdEncoding.EncodeToString([]byte("pp_" + strconv.Itoa(st.seq)))
}

// create validates every item against the true field rules and then
// creates all of them, or none. It returns the pay parts in input order.
func (st *store) create(user, companyID string, items []paysync.PayPartInput) ([]paysync.PayPart, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	c, ok := st.visible(user, companyID)
	if !ok {
		return nil, companyNotFound(companyID)
	}
	if len(items) == 0 {
		return nil, &apiError{msg: "pay_parts: at least one pay part is required", code: "VALIDATION_ERROR", index: -1, field: "pay_parts"}
	}
	for i, in := range items {
		if err := st.check(c, i, in); err != nil {
			return nil, err
		}
	}
	out := make([]paysync.PayPart, len(items))
	for i, in := range items {
		e, _ := c.employee(in.EmployeeID)
		out[i] = paysync.PayPart{ID: st.nextID(), EmployeeID: e.ID, EmployeeName: e.Name, Code: in.Code, Numbers: in.Numbers}
	}
	c.payParts = append(c.payParts, out...)
	return slices.Clone(out), nil
}

// check validates item i of a create_pay_parts call. The caller holds the lock.
func (st *store) check(c *company, i int, in paysync.PayPartInput) error {
	if _, ok := c.employee(in.EmployeeID); !ok {
		return invalidItem(i, "employee_id", "employee %s is not in company %s", in.EmployeeID, c.id)
	}
	m, ok := st.metaFor(in.Code)
	if !ok {
		return invalidItem(i, "code", "unknown code %q", in.Code)
	}
	for _, f := range paysync.Fields {
		present := in.Get(f).Valid
		switch rule := m.Rule(f); {
		case rule == paysync.RuleMandatory && !present:
			return invalidItem(i, string(f), "%s is mandatory for code %s", f, m.Code)
		case rule == paysync.RuleForbidden && present:
			return invalidItem(i, string(f), "%s is forbidden for code %s", f, m.Code)
		}
	}
	return nil
}

// delete removes every listed pay part of the company, or none.
func (st *store) delete(user, companyID string, ids []string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	c, ok := st.visible(user, companyID)
	if !ok {
		return companyNotFound(companyID)
	}
	if len(ids) == 0 {
		return &apiError{msg: "pay_part_ids: at least one id is required", code: "VALIDATION_ERROR", index: -1, field: "pay_part_ids"}
	}
	for i, id := range ids {
		if !slices.ContainsFunc(c.payParts, func(p paysync.PayPart) bool { return p.ID == id }) {
			return &apiError{
				msg:  fmt.Sprintf("pay part %s not found in company %s", id, companyID),
				code: "NOT_FOUND", index: i, field: "pay_part_ids",
			}
		}
	}
	c.payParts = slices.DeleteFunc(c.payParts, func(p paysync.PayPart) bool { return slices.Contains(ids, p.ID) })
	return nil
}

// seed creates one pay part without a visibility or rule check, as if a
// person typed it into payroll by hand. Only the employee must exist.
func (st *store) seed(companyID string, in paysync.PayPartInput) (paysync.PayPart, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, c := range st.companies {
		if c.id != companyID {
			continue
		}
		e, ok := c.employee(in.EmployeeID)
		if !ok {
			return paysync.PayPart{}, fmt.Errorf("seed pay part: employee %s is not in company %s", in.EmployeeID, companyID)
		}
		if in.Code == "" {
			return paysync.PayPart{}, errors.New("seed pay part: empty code")
		}
		p := paysync.PayPart{ID: st.nextID(), EmployeeID: e.ID, EmployeeName: e.Name, Code: in.Code, Numbers: in.Numbers}
		c.payParts = append(c.payParts, p)
		return p, nil
	}
	return paysync.PayPart{}, fmt.Errorf("seed pay part: company %s: %w", companyID, errNotFound)
}

// deleteDirect removes one pay part by hand.
func (st *store) deleteDirect(companyID, id string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, c := range st.companies {
		if c.id != companyID {
			continue
		}
		i := slices.IndexFunc(c.payParts, func(p paysync.PayPart) bool { return p.ID == id })
		if i < 0 {
			return fmt.Errorf("delete pay part: %s in company %s: %w", id, companyID, errNotFound)
		}
		c.payParts = slices.Delete(c.payParts, i, i+1)
		return nil
	}
	return fmt.Errorf("delete pay part: company %s: %w", companyID, errNotFound)
}

// snapshot returns a deep copy of the companies.
func (st *store) snapshot() []CompanyState {
	st.mu.RLock()
	defer st.mu.RUnlock()
	out := make([]CompanyState, 0, len(st.companies))
	for _, c := range st.companies {
		out = append(out, CompanyState{
			ID: c.id, Name: c.name, Owner: c.owner,
			Employees: append([]paysync.Employee{}, c.employees...),
			PayParts:  append([]paysync.PayPart{}, c.payParts...),
		})
	}
	return out
}
