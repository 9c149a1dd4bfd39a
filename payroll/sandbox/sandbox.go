// Package sandbox is a local stand-in for the Danish payroll API (Danløn):
// a schema-validating GraphQL server (graph-gophers/graphql-go, schema
// first) with a Keycloak-like token endpoint, fixture companies, the true
// pay code rules, and fault injection. Tests, the demo and benchmarks run
// against it over real HTTP.
//
// # Endpoints
//
//	POST /graphql                                                  GraphQL; needs "Authorization: Bearer <access token>"
//	POST /auth/realms/{realm}/protocol/openid-connect/token        password and refresh_token grants
//	POST /auth/realms/{realm}/protocol/openid-connect/revoke       revoke a refresh token's session (token=...)
//	GET  /auth/realms/{realm}/.well-known/openid-configuration     discovery of the endpoints above
//	GET  /auth/realms/{realm}/protocol/openid-connect/auth         the connect flow's authorization, with a test login (connect.go)
//	GET  /marketplace/select-company                               the connect flow's company choice (connect.go)
//	GET  /marketplace/code2token/{code}                            the connect flow's final tokens, scoped to one company
//	GET  /_sandbox/state                                           State as JSON
//	GET  /_sandbox/faults                                          the armed faults as a JSON list
//	PUT  /_sandbox/faults                                          replace the faults with a JSON list
//	POST /_sandbox/revoke                                          RevokeAll: the user disconnects the app
//	POST /_sandbox/refresh-token                                   {"refresh_token": "..."} from IssueRefreshToken
//
// The /_sandbox/ endpoints are for tests and operators and need no token.
// In fault JSON, delay and retry_after are duration strings ("300ms") and
// probability a number.
//
// # Variants
//
// Options choose how the schema types what Danløn does not document:
// units, rate and amount as Float or as Int holding hundredths
// (NumbersInt), *_allowed as Boolean or as the enum PayPartFieldRule
// (AllowedEnum), the dialect (the spec's snake_case, or the camelCase of
// Danløn's public doc: Options.Dialect), whether a delete mutation exists
// (Options.NoDelete), the name of create_pay_parts' input type, and the name
// of Employee's number field (employee_number, domainId, ..., or none). Whatever
// the schema exposes, the sandbox enforces the true rules of FixtureMeta:
// create_pay_parts validates every item and creates all of them or none.
//
// # Fixture
//
// The fixture user (default "demo"/"demo") owns CompanyNordlys and
// CompanyFjordtech; user "other" (password "other") owns CompanyHavblik,
// which "demo" cannot see. IDs are opaque base64 strings, as in Danløn.
//
// # Faults
//
// Faults (see FaultKind) make /graphql slow, refuse requests, or execute a
// request and then lose, replace or delay its response. They are set in
// Options.Faults, by SetFaults, or by PUT /_sandbox/faults, and apply after
// the bearer check to requests whose root field matches Fault.Op. A fault
// with a Probability fires on a random share of those requests, drawn from
// a source seeded with Options.Seed (see Fault).
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"time"

	graphql "github.com/graph-gophers/graphql-go"

	"github.com/paysync/paysync"
)

// NumberType says how units, rate and amount are typed in the schema.
type NumberType int

// The number types.
const (
	NumbersFloat NumberType = iota // Float
	NumbersInt                     // Int carrying value×10^IntScale
)

// AllowedType says how the *_allowed fields of PayPartMeta are typed.
type AllowedType int

// The *_allowed types.
const (
	AllowedBoolean AllowedType = iota // Boolean: true for MANDATORY and OPTIONAL
	AllowedEnum                       // enum PayPartFieldRule { MANDATORY OPTIONAL FORBIDDEN }
)

// Dialect is the naming style of the sandbox's API.
type Dialect int

// The dialects.
const (
	SnakeCase Dialect = iota // the spec's: companies(company_ids:), create_pay_parts(company_id:, pay_parts:)
	CamelCase                // Danløn's public doc's: companiesExt(input: {companyIds}) { companies {…} }, createPayParts(input:) { createdPayParts {…} }
)

// Options configure a Server. The zero value is a working sandbox.
type Options struct {
	// Dialect chooses the API's names and shapes (default SnakeCase).
	Dialect Dialect
	// NoDelete leaves the delete mutation out, as a server that offers
	// none (no public source shows the camelCase API's).
	NoDelete bool
	Numbers  NumberType  // how units/rate/amount are typed: Float, or Int holding hundredths
	IntScale int32       // for NumbersInt: decimal places carried by the Int; <= 0 means 2
	Allowed  AllowedType // how *_allowed is typed: Boolean, or enum PayPartFieldRule
	// InputTypeName names the input type of create_pay_parts' pay_parts
	// argument (default "PayPartInput"), so a test can prove that a client
	// finds it by introspection.
	InputTypeName string
	// EmployeeNumberField names the field Employee serves the employee
	// number under: one of EmployeeNumberFields (default
	// "employee_number"; Danløn's public doc calls it "domainId"), or
	// "none" to leave it out.
	EmployeeNumberField string
	AccessTTL           time.Duration // access token lifetime (default 5m)
	// Rotate makes each refresh_token grant invalidate the refresh token
	// it used and return a new one. As in Keycloak, presenting a rotated-
	// away token again is refused as reused and ends that session.
	Rotate             bool
	Realm              string // default "danlon-sandbox"
	ClientID           string // default "paysync-sandbox"
	ClientSecret       string // default "sandbox-secret"
	Username, Password string // the fixture user for the password grant; default "demo"/"demo"
	Faults             []Fault
	// Seed seeds the PCG source (math/rand/v2) that decides whether a
	// fault with a Probability fires, so runs are reproducible; 0 means 1.
	Seed int64
	Now  func() time.Time // clock for token expiry; default time.Now
	// ExtraCompanies adds that many generated companies owned by the
	// fixture user (see LoadCompanyID), each with ExtraEmployees
	// employees (default 4): load tests spread entries over them.
	ExtraCompanies, ExtraEmployees int
	// OnCreate, when set, is called after every successful
	// create_pay_parts with the company and the pay parts created (the
	// load tool times publish → created with it). It must not block.
	OnCreate func(companyID string, created []paysync.PayPart)
}

// EmployeeNumberFields are the names Options.EmployeeNumberField can give
// the employee number.
var EmployeeNumberFields = []string{"employee_number", "employeeNumber", "domainId", "domain_id", "number"}

// reservedTypeNames are the schema's own type names, which InputTypeName
// must not take.
var reservedTypeNames = []string{
	"Query", "Mutation", "Company", "Employee", "PayPart", "PayPartMeta", "CurrentCompany",
	"PayPartFieldRule", "ID", "String", "Int", "Float", "Boolean",
	"CompaniesExtInput", "EmployeesInput", "CreatePayPartsInput", "DeletePayPartsInput", "CompaniesPayload",
	"EmployeesPayload", "PayPartsPayload", "PayPartsMetaPayload", "CreatePayPartsPayload", "DeletePayPartsPayload", "PayPartEmployee",
}

var gqlNameRE = regexp.MustCompile(`^[_A-Za-z][_0-9A-Za-z]*$`)

func (o Options) withDefaults() Options {
	if o.IntScale <= 0 {
		o.IntScale = 2
	}
	if o.InputTypeName == "" {
		o.InputTypeName = "PayPartInput"
	}
	if o.EmployeeNumberField == "" {
		o.EmployeeNumberField = "employee_number"
		if o.Dialect == CamelCase {
			o.EmployeeNumberField = "domainId"
		}
	}
	if o.AccessTTL <= 0 {
		o.AccessTTL = 5 * time.Minute
	}
	if o.Realm == "" {
		o.Realm = "danlon-sandbox"
	}
	if o.ClientID == "" {
		o.ClientID = "paysync-sandbox"
	}
	if o.ClientSecret == "" {
		o.ClientSecret = "sandbox-secret"
	}
	if o.Username == "" {
		o.Username = "demo"
	}
	if o.Password == "" {
		o.Password = "demo"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.ExtraCompanies > 0 && o.ExtraEmployees <= 0 {
		o.ExtraEmployees = 4
	}
	return o
}

func (o Options) validate() error {
	switch {
	case o.Dialect != SnakeCase && o.Dialect != CamelCase:
		return fmt.Errorf("unknown Dialect %d", o.Dialect)
	case o.Numbers != NumbersFloat && o.Numbers != NumbersInt:
		return fmt.Errorf("unknown NumberType %d", o.Numbers)
	case o.Allowed != AllowedBoolean && o.Allowed != AllowedEnum:
		return fmt.Errorf("unknown AllowedType %d", o.Allowed)
	case o.IntScale > 9:
		return fmt.Errorf("IntScale %d is more than 9 decimal places", o.IntScale)
	case !gqlNameRE.MatchString(o.InputTypeName) || o.InputTypeName[:min(2, len(o.InputTypeName))] == "__":
		return fmt.Errorf("InputTypeName %q is not a GraphQL type name", o.InputTypeName)
	case slices.Contains(reservedTypeNames, o.InputTypeName):
		return fmt.Errorf("InputTypeName %q is taken by the schema", o.InputTypeName)
	case o.EmployeeNumberField != "none" && !slices.Contains(EmployeeNumberFields, o.EmployeeNumberField):
		return fmt.Errorf("EmployeeNumberField %q is not none or one of %v", o.EmployeeNumberField, EmployeeNumberFields)
	case o.Username == otherUsername:
		return fmt.Errorf("Username %q is the fixture's other user", o.Username)
	}
	return nil
}

// Server is the sandbox payroll API. It is safe for concurrent use.
type Server struct {
	opts    Options // effective; Faults is the initial list
	st      *store
	auth    *authority
	schema  *graphql.Schema
	handler http.Handler

	cmu      sync.Mutex // guards counters, faults and rng
	counters Counters
	faults   []Fault
	rng      *rand.Rand // Fault.Probability draws; restarted from opts.Seed by SetFaults

	closing   chan struct{} // closed by Close: ends fault waits
	closeOnce sync.Once

	lmu    sync.Mutex // guards the listener fields
	srv    *http.Server
	url    string
	served chan struct{}
	closed bool
}

// New returns a sandbox with fresh fixture data. It panics on invalid
// options (an unknown variant, a bad InputTypeName or fault), as they are
// mistakes in the test or command that sets them.
func New(opts Options) *Server {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		panic("sandbox: invalid options: " + err.Error())
	}
	opts.Faults = mustValidFaults(opts.Faults)
	s := &Server{
		opts:     opts,
		st:       newStore(opts.Username, opts.ExtraCompanies, opts.ExtraEmployees),
		auth:     newAuthority(opts),
		counters: newCounters(),
		faults:   slices.Clone(opts.Faults),
		rng:      newFaultRand(opts.Seed),
		closing:  make(chan struct{}),
	}
	s.st.onCreate = opts.OnCreate
	s.schema = newSchema(s.st, opts, execTracer{})

	mux := http.NewServeMux()
	mux.HandleFunc("/graphql", s.handleGraphQL)
	const oidc = "/auth/realms/{realm}/protocol/openid-connect/"
	mux.HandleFunc("POST "+oidc+"token", s.handleToken)
	mux.HandleFunc("POST "+oidc+"revoke", s.handleRevoke)
	mux.HandleFunc("GET /auth/realms/{realm}/.well-known/openid-configuration", s.handleDiscovery)
	s.connectRoutes(mux)
	s.adminRoutes(mux)
	s.handler = mux
	return s
}

// Handler returns the whole server as an http.Handler, for httptest.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on addr (e.g. "127.0.0.1:0"), serves in a goroutine and
// returns the base URL, e.g. "http://127.0.0.1:41234".
func (s *Server) Start(addr string) (string, error) {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if s.srv != nil || s.closed {
		return "", errors.New("sandbox: start: already started or closed")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("sandbox: start: %w", err)
	}
	s.srv = &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	s.url = "http://" + ln.Addr().String()
	s.served = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		_ = srv.Serve(ln) // ErrServerClosed after Close
	}(s.srv, s.served)
	return s.url, nil
}

// URL returns the base URL after Start, or "". GraphQL is URL()+"/graphql";
// the token endpoint is URL()+"/auth/realms/"+realm+"/protocol/openid-connect/token".
func (s *Server) URL() string {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	return s.url
}

// Close ends pending fault waits and shuts the listener down gracefully,
// waiting for requests in flight until ctx ends. It is safe to call more
// than once, and without Start.
func (s *Server) Close(ctx context.Context) error {
	s.closeOnce.Do(func() { close(s.closing) })
	s.lmu.Lock()
	srv, served := s.srv, s.served
	s.closed = true
	s.lmu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Shutdown(ctx)
	if err != nil {
		_ = srv.Close()
	}
	<-served
	if err != nil {
		return fmt.Errorf("sandbox: close: %w", err)
	}
	return nil
}

// Options returns the effective options, defaults filled and Faults the
// currently armed list.
func (s *Server) Options() Options {
	o := s.opts
	o.Faults = s.Faults()
	return o
}

// IssueRefreshToken returns a new offline refresh token for the fixture
// user, as if the user had connected the app.
func (s *Server) IssueRefreshToken() string {
	return s.auth.newSession(s.opts.Username).refresh
}

// RevokeAll is the user disconnecting the app: every refresh and access
// token becomes invalid.
func (s *Server) RevokeAll() { s.auth.revokeAll() }

// State returns a deep copy of the companies, employees and pay parts,
// and the counters.
func (s *Server) State() State {
	cs := s.st.snapshot()
	s.cmu.Lock()
	defer s.cmu.Unlock()
	return State{Companies: cs, Counters: s.counters.clone()}
}

// PayPartCount returns how many pay parts all companies hold, cheaply
// (State copies every one).
func (s *Server) PayPartCount() int {
	s.st.mu.RLock()
	defer s.st.mu.RUnlock()
	n := 0
	for _, c := range s.st.companies {
		n += len(c.payParts)
	}
	return n
}

// SeedPayPart creates a pay part directly, as if typed into payroll by
// hand. Only the company, the employee and a non-empty code are checked,
// so tests can seed what the API would refuse.
func (s *Server) SeedPayPart(companyID string, p paysync.PayPartInput) (paysync.PayPart, error) {
	return s.st.seed(companyID, p)
}

// DeletePayPartDirect deletes a pay part by hand, as if removed in payroll.
func (s *Server) DeletePayPartDirect(companyID, id string) error {
	return s.st.deleteDirect(companyID, id)
}

// count updates the counters under their lock.
func (s *Server) count(f func(*Counters)) {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	f(&s.counters)
}
