package payroll

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/paysync/paysync"
)

// ErrCompanyNotFound is wrapped by errors for a company the account cannot
// see (the shared paysync.ErrCompanyNotFound, so that mapping can tell it
// from a transient failure without importing payroll).
var ErrCompanyNotFound = paysync.ErrCompanyNotFound

type wireEmployeeRef struct {
	ID   string  `json:"id"`
	Name *string `json:"name"`
}

type wirePayPart struct {
	ID       string           `json:"id"`
	Code     *string          `json:"code"`
	Units    json.RawMessage  `json:"units"`
	Rate     json.RawMessage  `json:"rate"`
	Amount   json.RawMessage  `json:"amount"`
	Employee *wireEmployeeRef `json:"employee"`
}

type wireEmployee struct {
	ID       string                    `json:"id"`
	Name     *string                   `json:"name"`
	Number   json.RawMessage           `json:"number"` // aliased: a String, ID or Int
	Email    *string                   `json:"email"`  // aliased
	PayParts wrappedList[*wirePayPart] `json:"pay_parts"`
}

// wrappedList reads a list served bare ([…]) or wrapped in an object with
// one field (the camelCase dialect's { payParts: […] }).
type wrappedList[T any] []T

func (l *wrappedList[T]) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '{' {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		if len(m) != 1 {
			return fmt.Errorf("a wrapped list has %d fields, want 1", len(m))
		}
		for _, v := range m {
			b = v
		}
	}
	var out []T
	if err := json.Unmarshal(b, &out); err != nil {
		return err
	}
	*l = out
	return nil
}

// employeeNumber reads a number served as a string or as an Int.
func employeeNumber(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return strings.TrimSpace(s), nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", fmt.Errorf("employee number %s is neither a string nor a number", raw)
	}
	return n.String(), nil
}

type wireCompany struct {
	ID        string                     `json:"id"`
	Name      *string                    `json:"name"`
	Employees wrappedList[*wireEmployee] `json:"employees"`
	PayParts  wrappedList[*wirePayPart]  `json:"pay_parts"`
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func decodePayPart(s Schema, w *wirePayPart) (paysync.PayPart, error) {
	p := paysync.PayPart{ID: w.ID, Code: str(w.Code)}
	if w.Employee != nil {
		p.EmployeeID, p.EmployeeName = w.Employee.ID, str(w.Employee.Name)
	}
	for _, f := range paysync.Fields {
		var raw json.RawMessage
		switch f {
		case paysync.FieldUnits:
			raw = w.Units
		case paysync.FieldRate:
			raw = w.Rate
		case paysync.FieldAmount:
			raw = w.Amount
		}
		v, err := s.Out[f].Decode(raw)
		if err != nil {
			return p, fmt.Errorf("pay part %s: %s: %w", w.ID, f, err)
		}
		p.Set(f, v)
	}
	return p, nil
}

func decodePayParts(s Schema, ws []*wirePayPart) ([]paysync.PayPart, error) {
	out := make([]paysync.PayPart, 0, len(ws))
	for _, w := range ws {
		if w == nil {
			continue
		}
		p, err := decodePayPart(s, w)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func decodeCompanies(s Schema, op string, data json.RawMessage) ([]paysync.Company, error) {
	var r struct {
		Companies wrappedList[*wireCompany] `json:"companies"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, decodeErr(op, err)
	}
	out := make([]paysync.Company, 0, len(r.Companies))
	for _, wc := range r.Companies {
		if wc == nil {
			continue
		}
		c := paysync.Company{ID: wc.ID, Name: str(wc.Name)}
		for _, we := range wc.Employees {
			if we == nil {
				continue
			}
			e := paysync.Employee{ID: we.ID, Name: str(we.Name), Email: strings.TrimSpace(str(we.Email))}
			var err error
			if e.Number, err = employeeNumber(we.Number); err != nil {
				return nil, decodeErr(op, fmt.Errorf("employee %s: %w", we.ID, err))
			}
			pps, err := decodePayParts(s, we.PayParts)
			if err != nil {
				return nil, decodeErr(op, err)
			}
			for i := range pps {
				if pps[i].EmployeeID == "" {
					pps[i].EmployeeID, pps[i].EmployeeName = e.ID, e.Name
				}
			}
			e.PayParts = pps
			c.Employees = append(c.Employees, e)
		}
		pps, err := decodePayParts(s, wc.PayParts)
		if err != nil {
			return nil, decodeErr(op, err)
		}
		c.PayParts = pps
		out = append(out, c)
	}
	return out, nil
}

func decodeErr(op string, err error) *Error {
	return &Error{Op: op, Class: Ambiguous, Index: -1, Reason: "unreadable response: " + err.Error(), Err: err}
}

func idsVar(vars map[string]any, name string, ids []string) {
	if ids != nil {
		vars[name] = ids
	}
}

// companyVars are the variables of the companies queries: the ids as
// arguments (snake_case), or in the input objects (camelCase: always
// sent, empty for "all").
func companyVars(s Schema, companyIDs, employeeIDs []string, employees bool) map[string]any {
	vars := map[string]any{}
	if s.Dialect != Camel {
		idsVar(vars, s.Names.CompanyIDs, companyIDs)
		if employees {
			idsVar(vars, s.Names.EmployeeIDs, employeeIDs)
		}
		return vars
	}
	in := map[string]any{}
	idsVar(in, s.Names.CompanyIDs, companyIDs)
	vars["input"] = in
	if employees {
		emp := map[string]any{}
		idsVar(emp, s.Names.EmployeeIDs, employeeIDs)
		vars["employees"] = emp
	}
	return vars
}

// Companies lists the companies the account can see, optionally only
// those with the given IDs (nil: all).
func (c *Client) Companies(ctx context.Context, companyIDs []string) ([]paysync.Company, error) {
	s, err := c.Schema(ctx)
	if err != nil {
		return nil, err
	}
	data, err := c.query(ctx, opCompanies, companyVars(s, companyIDs, nil, false))
	if err != nil {
		return nil, err
	}
	return decodeCompanies(s, opCompanies, data)
}

func (c *Client) oneCompany(ctx context.Context, op, companyID string, employeeIDs []string) (paysync.Company, error) {
	if companyID == "" {
		return paysync.Company{}, &Error{Op: op, Class: Rejected, Index: -1, Reason: "company id is empty"}
	}
	s, err := c.Schema(ctx)
	if err != nil {
		return paysync.Company{}, err
	}
	data, err := c.query(ctx, op, companyVars(s, []string{companyID}, employeeIDs, op != opCompanyPayParts))
	if err != nil {
		return paysync.Company{}, err
	}
	cs, err := decodeCompanies(s, op, data)
	if err != nil {
		return paysync.Company{}, err
	}
	for _, co := range cs {
		if co.ID == companyID {
			return co, nil
		}
	}
	return paysync.Company{}, &Error{Op: op, Class: Rejected, Index: -1,
		Reason: fmt.Sprintf("company %s not found (not visible to this payroll account)", companyID),
		Err:    ErrCompanyNotFound}
}

// Employees lists a company's employees, optionally only the given IDs.
func (c *Client) Employees(ctx context.Context, companyID string, employeeIDs []string) ([]paysync.Employee, error) {
	co, err := c.oneCompany(ctx, opCompanyEmployees, companyID, employeeIDs)
	return co.Employees, err
}

// Company returns a company with its employees (without pay parts).
func (c *Client) Company(ctx context.Context, companyID string) (paysync.Company, error) {
	return c.oneCompany(ctx, opCompanyEmployees, companyID, nil)
}

// EmployeePayParts lists employees of a company with their pay parts
// (companies { employees { pay_parts } }).
func (c *Client) EmployeePayParts(ctx context.Context, companyID string, employeeIDs []string) ([]paysync.Employee, error) {
	co, err := c.oneCompany(ctx, opEmployeePayParts, companyID, employeeIDs)
	return co.Employees, err
}

// CompanyPayParts lists a company's pay parts through companies { pay_parts }.
func (c *Client) CompanyPayParts(ctx context.Context, companyID string) ([]paysync.PayPart, error) {
	co, err := c.oneCompany(ctx, opCompanyPayParts, companyID, nil)
	return co.PayParts, err
}

// PayParts lists a company's pay parts through the top-level pay_parts
// query, or through the company's when the server has none (the
// camelCase dialect). Reconciliation reads what exists with it.
func (c *Client) PayParts(ctx context.Context, companyID string) ([]paysync.PayPart, error) {
	s, err := c.Schema(ctx)
	if err != nil {
		return nil, err
	}
	if s.Names.TopPayParts == "" {
		return c.CompanyPayParts(ctx, companyID)
	}
	data, err := c.query(ctx, opPayParts, map[string]any{"company_id": companyID})
	if err != nil {
		return nil, err
	}
	var r struct {
		PayParts []*wirePayPart `json:"pay_parts"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, decodeErr(opPayParts, err)
	}
	pps, err := decodePayParts(s, r.PayParts)
	if err != nil {
		return nil, decodeErr(opPayParts, err)
	}
	return pps, nil
}

// PayPartsMeta lists the valid pay codes and their field rules.
func (c *Client) PayPartsMeta(ctx context.Context) ([]paysync.PayPartMeta, error) {
	data, err := c.query(ctx, opPayPartsMeta, nil)
	if err != nil {
		return nil, err
	}
	var r struct {
		Meta wrappedList[*struct {
			Code          string          `json:"code"`
			Description   *string         `json:"description"`
			UnitsAllowed  json.RawMessage `json:"units_allowed"`
			RateAllowed   json.RawMessage `json:"rate_allowed"`
			AmountAllowed json.RawMessage `json:"amount_allowed"`
		}] `json:"pay_parts_meta"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, decodeErr(opPayPartsMeta, err)
	}
	out := make([]paysync.PayPartMeta, 0, len(r.Meta))
	for _, m := range r.Meta {
		if m == nil {
			continue
		}
		pm := paysync.PayPartMeta{Code: m.Code, Description: str(m.Description)}
		var err error
		if pm.Units, err = decodeRule(m.UnitsAllowed); err == nil {
			if pm.Rate, err = decodeRule(m.RateAllowed); err == nil {
				pm.Amount, err = decodeRule(m.AmountAllowed)
			}
		}
		if err != nil {
			return nil, decodeErr(opPayPartsMeta, fmt.Errorf("code %s: %w", m.Code, err))
		}
		out = append(out, pm)
	}
	return out, nil
}

// decodeRule reads a *_allowed value: Boolean (true = allowed, false =
// forbidden) or a string/enum word; null is unknown.
func decodeRule(raw json.RawMessage) (paysync.FieldRule, error) {
	raw = bytes.TrimSpace(raw)
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return paysync.RuleUnknown, nil
	case string(raw) == "true":
		return paysync.FieldRuleFromBool(true), nil
	case string(raw) == "false":
		return paysync.FieldRuleFromBool(false), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return paysync.RuleUnknown, fmt.Errorf("allowed flag %s is neither Boolean nor a word", raw)
	}
	return paysync.ParseFieldRule(s)
}

// CurrentCompany returns the id of the account's current company.
func (c *Client) CurrentCompany(ctx context.Context) (string, error) {
	data, err := c.query(ctx, opCurrentCompany, nil)
	if err != nil {
		return "", err
	}
	var r struct {
		Current *struct {
			ID string `json:"id"`
		} `json:"current_company"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return "", decodeErr(opCurrentCompany, err)
	}
	if r.Current == nil || r.Current.ID == "" {
		return "", &Error{Op: opCurrentCompany, Class: Rejected, Index: -1, Reason: "the account has no current company"}
	}
	return r.Current.ID, nil
}

// wireInput is one PayPartInput on the wire; absent numbers are omitted.
type wireInput struct {
	EmployeeID string          `json:"employee_id"`
	Code       string          `json:"code"`
	Units      json.RawMessage `json:"units,omitempty"`
	Rate       json.RawMessage `json:"rate,omitempty"`
	Amount     json.RawMessage `json:"amount,omitempty"`
}

// camelInput is wireInput in the camelCase dialect.
type camelInput struct {
	EmployeeID string          `json:"employeeId"`
	Code       string          `json:"code"`
	Units      json.RawMessage `json:"units,omitempty"`
	Rate       json.RawMessage `json:"rate,omitempty"`
	Amount     json.RawMessage `json:"amount,omitempty"`
}

// EncodeInputs renders pay part inputs for the server's schema. A number
// that cannot be carried exactly is an error naming the item and field.
func EncodeInputs(s Schema, items []paysync.PayPartInput) ([]wireInput, error) {
	out := make([]wireInput, len(items))
	for i, it := range items {
		w := wireInput{EmployeeID: it.EmployeeID, Code: it.Code}
		for _, f := range paysync.Fields {
			v := it.Get(f)
			if !v.Valid {
				continue
			}
			raw, err := s.In[f].Encode(v.Decimal)
			if err != nil {
				return nil, fmt.Errorf("pay_parts[%d].%s: %w", i, f, err)
			}
			switch f {
			case paysync.FieldUnits:
				w.Units = raw
			case paysync.FieldRate:
				w.Rate = raw
			case paysync.FieldAmount:
				w.Amount = raw
			}
		}
		out[i] = w
	}
	return out, nil
}

// CreatePayParts creates items in a company with one create_pay_parts call
// and returns the created pay parts, result[i] being items[i]. It is never
// retried here. On an Ambiguous error the caller must reconcile (read the
// company's pay parts) before sending again.
func (c *Client) CreatePayParts(ctx context.Context, companyID string, items []paysync.PayPartInput) ([]paysync.PayPart, error) {
	if len(items) == 0 {
		return nil, nil
	}
	s, doc, err := c.doc(ctx, opCreatePayParts)
	if err != nil {
		return nil, err
	}
	wire, err := EncodeInputs(s, items)
	if err != nil {
		var idx int
		fmt.Sscanf(err.Error(), "pay_parts[%d]", &idx)
		return nil, &Error{Op: opCreatePayParts, Class: Rejected, Index: idx, Reason: err.Error(), Err: err}
	}
	vars := map[string]any{"company_id": companyID, "pay_parts": wire}
	if s.Dialect == Camel {
		camel := make([]camelInput, len(wire))
		for i, w := range wire {
			camel[i] = camelInput(w)
		}
		vars = map[string]any{"input": map[string]any{s.Names.CompanyID: companyID, s.Names.Items: camel}}
	}
	data, err := c.exec(ctx, opCreatePayParts, doc, vars)
	var r struct {
		Created wrappedList[*wirePayPart] `json:"create_pay_parts"`
	}
	if len(data) > 0 && string(data) != "null" {
		if derr := json.Unmarshal(data, &r); derr != nil && err == nil {
			return nil, decodeErr(opCreatePayParts, derr)
		}
	}
	if err != nil {
		var pe *Error
		if errors.As(err, &pe) && pe.Class == Rejected && len(r.Created) > 0 {
			// Errors beside created items: some may exist.
			pe.Class = Ambiguous
			pe.Reason = "partial result: " + pe.Reason
		}
		return nil, err
	}
	created, derr := decodePayParts(s, r.Created)
	if derr != nil {
		return nil, decodeErr(opCreatePayParts, derr)
	}
	matched, merr := matchCreated(items, created)
	if merr != nil {
		return nil, &Error{Op: opCreatePayParts, Class: Ambiguous, Index: -1,
			Reason: "created pay parts do not match the request: " + merr.Error(), Err: merr}
	}
	return matched, nil
}

// matchCreated pairs returned pay parts with the input items: by position
// when every position agrees, otherwise by content (each returned pay part
// used once).
func matchCreated(items []paysync.PayPartInput, created []paysync.PayPart) ([]paysync.PayPart, error) {
	if len(created) != len(items) {
		return nil, fmt.Errorf("sent %d, got %d back", len(items), len(created))
	}
	ok := true
	for i := range items {
		if !sameItem(created[i], items[i]) {
			ok = false
			break
		}
	}
	if ok {
		return created, nil
	}
	out := make([]paysync.PayPart, len(items))
	used := make([]bool, len(created))
	for i, it := range items {
		found := false
		for j, p := range created {
			if !used[j] && sameItem(p, it) {
				out[i], used[j], found = p, true, true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("item %d (%s %s %s) has no matching result", i, it.EmployeeID, it.Code, it.Numbers)
		}
	}
	return out, nil
}

// sameItem compares what was sent with what came back. Fields not sent are
// ignored (the server may fill them in); an empty employee means the server
// did not return it.
func sameItem(p paysync.PayPart, in paysync.PayPartInput) bool {
	if p.ID == "" || p.Code != in.Code || (p.EmployeeID != "" && p.EmployeeID != in.EmployeeID) {
		return false
	}
	for _, f := range paysync.Fields {
		want := in.Get(f)
		if !want.Valid {
			continue
		}
		got := p.Get(f)
		if !got.Valid || !got.Decimal.Equal(want.Decimal) {
			return false
		}
	}
	return true
}

// DeleteResult is what delete_pay_parts returned; its meaning is not
// specified, so the raw value is kept.
type DeleteResult struct {
	Raw json.RawMessage
}

// DeletePayParts deletes pay parts of a company with one call. A false
// result is reported as Ambiguous: the caller reads back what still exists.
func (c *Client) DeletePayParts(ctx context.Context, companyID string, ids []string) (DeleteResult, error) {
	if len(ids) == 0 {
		return DeleteResult{}, nil
	}
	s, doc, err := c.doc(ctx, opDeletePayParts)
	if err != nil {
		return DeleteResult{}, err
	}
	if s.Names.Delete == "" {
		return DeleteResult{}, noDelete(opDeletePayParts)
	}
	vars := map[string]any{"company_id": companyID, "pay_part_ids": ids}
	if s.Dialect == Camel {
		vars = map[string]any{"input": map[string]any{s.Names.CompanyID: companyID, s.Names.PayPartIDs: ids}}
	}
	data, err := c.exec(ctx, opDeletePayParts, doc, vars)
	if err != nil {
		return DeleteResult{}, err
	}
	var r struct {
		Result json.RawMessage `json:"delete_pay_parts"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return DeleteResult{}, decodeErr(opDeletePayParts, err)
	}
	if string(bytes.TrimSpace(r.Result)) == "false" || payloadSaysFalse(r.Result) {
		return DeleteResult{Raw: r.Result}, &Error{Op: opDeletePayParts, Class: Ambiguous, Index: -1, Reason: "server answered false"}
	}
	return DeleteResult{Raw: r.Result}, nil
}

// payloadSaysFalse reports whether a delete payload (an object) has a
// Boolean field that is false (e.g. { success: false }).
func payloadSaysFalse(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return false
	}
	for _, v := range m {
		if string(bytes.TrimSpace(v)) == "false" {
			return true
		}
	}
	return false
}

// ErrNoDelete: the server offers no mutation that deletes pay parts (no
// public source shows the camelCase API's), so paysync cannot take back
// what it created: revert, corrections that replace sent pay parts and
// replay refuse up front. It is a capability of the server, never
// transient.
var ErrNoDelete = errors.New("this payroll server offers no delete mutation: paysync cannot delete pay parts there (delete them by hand in payroll)")

func noDelete(op string) *Error {
	return &Error{Op: op, Class: Rejected, Index: -1, Reason: ErrNoDelete.Error(), Err: ErrNoDelete}
}

// DeleteSupport is nil when the server has a delete mutation, else an
// error wrapping ErrNoDelete (the Schema is a mapping.WireChecker: the
// corrector asks it before it plans deletes).
func (s Schema) DeleteSupport() error {
	if s.Names.Delete == "" {
		return noDelete("DeletePayParts")
	}
	return nil
}

// CanDelete reports whether the server deletes pay parts: nil, an error
// wrapping ErrNoDelete, or the schema probe's error. companyID is for
// callers that route by company (Router); the Client ignores it.
func (c *Client) CanDelete(ctx context.Context, companyID string) error {
	s, err := c.Schema(ctx)
	if err != nil {
		return err
	}
	return s.DeleteSupport()
}

// CanDelete is Client.CanDelete through the company's connection.
func (r *Router) CanDelete(ctx context.Context, companyID string) error {
	cl, _, err := r.clientFor("CanDelete", companyID)
	if err != nil {
		return err
	}
	return cl.CanDelete(ctx, companyID)
}
