package payroll

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/paysync/paysync"
)

// Causes the probes report, for the caller's hint: Check.Err wraps one of
// them, or ErrRevoked, ErrNoRefreshToken, an *InitialTokenError,
// ErrClientRejected or ErrCompanyNotFound.
var (
	ErrTokenStore       = errors.New("the token store cannot be read")
	ErrRefresh          = errors.New("no access token: the refresh failed")
	ErrClientUnchecked  = errors.New("the client id and secret could not be checked")
	ErrSchemaProbe      = errors.New("the schema probe failed")
	ErrSchemaUnverified = errors.New("the schema is the spec's defaults, not read from the server")
	ErrWireMismatch     = errors.New("the wire number types disagree with the server")
	ErrNoCurrentCompany = errors.New("the account's current company cannot be read")
	ErrNoEmployees      = errors.New("the company has no employees")
)

// TokenProbe names, in ProbeToken's details, what the operator configured.
type TokenProbe struct {
	// Place names the client's token store (Config.Store), e.g. "ledger
	// /var/lib/paysync/ledger.db"; default its StoreInfo.Where.
	Place string
	// Configured names the configured initial refresh token
	// (Config.RefreshToken) as the operator knows it, e.g.
	// "PAYSYNC_REFRESH_TOKEN"; default "the configured refresh token".
	Configured string
}

// TokenCheck is what ProbeToken found.
type TokenCheck struct {
	paysync.Check
	// Current is the account's current company, read to prove the access
	// token ("" when that read failed for another reason than a revoked
	// connection).
	Current string
}

// ProbeToken checks that the client gets an access token and that the
// server takes it: the refresh token is chosen (the stored one, or the
// configured one), an access token obtained (refreshing, and so rotating,
// only when the stored one is not valid any more) and one call made with
// it. The detail says where the refresh token came from, whether it was
// refreshed and rotated (by fingerprint), and until when the access token
// is valid. Err of a failure wraps ErrTokenStore (the store cannot be
// read), ErrNoRefreshToken (none configured or stored), an
// *InitialTokenError (the configured token cannot serve a store without
// one of its own; wrapping ErrRevoked when the server refused it),
// ErrRevoked (the refresh or the access token was refused) or ErrRefresh
// (no access token otherwise: the token endpoint cannot be reached, or
// refuses the client). Secrets are never in the detail.
func (c *Client) ProbeToken(ctx context.Context, o TokenProbe) TokenCheck {
	store := c.cfg.Store
	if info, ok := store.(StoreInfo); ok && o.Place == "" {
		o.Place = info.Where()
	}
	place, where := "the token store", "token store" // "saved in …"; "… cannot be read"
	if o.Place != "" {
		place, where = o.Place, where+" "+o.Place
	}
	if o.Configured == "" {
		o.Configured = "the configured refresh token"
	}
	var seen []string // tokens read from the store: never in the detail
	load := func() (StoredToken, error) {
		if store == nil {
			return StoredToken{}, ErrNoStoredToken
		}
		st, err := store.Load(ctx)
		seen = append(seen, st.RefreshToken, st.AccessToken)
		return st, err
	}
	fail := func(err error, format string, a ...any) TokenCheck {
		return TokenCheck{Check: c.checked(paysync.CheckFail, err, seen, format, a...)}
	}

	configured := c.ts.seed
	before, lerr := load()
	stored := ""
	switch {
	case lerr == nil:
		stored = Fingerprint(before.RefreshToken)
	case !errors.Is(lerr, ErrNoStoredToken):
		return fail(fmt.Errorf("%w: %w", ErrTokenStore, lerr), "%s: %v", where, lerr)
	}
	var source string
	switch {
	case stored != "" && (configured == "" || before.Seed == configured):
		source = "token store (rotated from the configured token)"
	case configured != "":
		source = o.Configured
	default:
		return fail(ErrNoRefreshToken, "no refresh token: %s is not set and none is stored in %s", o.Configured, place)
	}
	if _, err := c.ts.Token(ctx); err != nil {
		var initial *InitialTokenError
		switch {
		case errors.As(err, &initial) && initial.Err != nil:
			return fail(fmt.Errorf("%w: %w", ErrRevoked, err), "%s", initial.Error())
		case errors.As(err, &initial):
			return fail(err, "%s", initial.Error())
		}
		msg, revoked := tokenFailure(err)
		if revoked {
			return fail(fmt.Errorf("%w: %w", ErrRevoked, err), "connection revoked: the refresh token was refused (%s)", msg)
		}
		return fail(fmt.Errorf("%w: %w", ErrRefresh, err), "refresh failed: %s", msg)
	}
	// An access token taken from the store proves little: one call shows
	// the server accepts it (and refreshes when it does not).
	cur, err := c.CurrentCompany(ctx)
	if errors.Is(err, ErrRevoked) {
		return fail(err, "connection revoked: %v", err)
	}
	after, aerr := load()
	parts := []string{"refresh token from " + source}
	switch {
	case c.ts.Refreshes() == 0:
		parts = append(parts, fmt.Sprintf("stored access token still valid, no refresh needed (refresh token fingerprint %s)", stored))
	default:
		spent := stored
		if spent == "" || (configured != "" && before.Seed != configured) {
			spent = configured // the configured token was the one used
		}
		newFP := ""
		if aerr == nil {
			newFP = Fingerprint(after.RefreshToken)
		}
		if newFP != spent {
			parts = append(parts, fmt.Sprintf("refreshed and rotated: fingerprint %s → %s, saved in %s", spent, newFP, place))
		} else {
			parts = append(parts, fmt.Sprintf("refreshed, not rotated (fingerprint %s, kept in %s)", newFP, place))
		}
	}
	if exp, ok := c.ts.Current(); ok {
		parts = append(parts, fmt.Sprintf("access token valid until %s (%s)", exp.UTC().Format(time.RFC3339), exp.Sub(c.cfg.Now()).Round(time.Second)))
	}
	if configured != "" && stored != "" && before.Seed != configured {
		parts = append(parts, o.Configured+" differs from the one the stored token descends from: it replaced it (a re-connect)")
	}
	return TokenCheck{Check: c.checked(paysync.CheckOK, nil, seen, "%s", strings.Join(parts, "; ")), Current: cur}
}

// tokenFailure describes a failed refresh without the server's raw answer,
// and says whether the refresh token was refused (the connection revoked).
func tokenFailure(err error) (string, bool) {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		what := strings.TrimSpace(re.ErrorCode + " " + re.ErrorDescription)
		if what == "" {
			what = fmt.Sprintf("HTTP %d", status)
		}
		return "token endpoint: " + what, re.ErrorCode == "invalid_grant"
	}
	return err.Error(), errors.Is(err, ErrRevoked)
}

// ProbeClient checks the client id and secret. A refresh this token source
// made proves them; when none was needed (the stored access token was
// still valid, and a wrong secret would go unnoticed until the next
// refresh), CheckClient asks the token endpoint without spending, or even
// sending, the connection's refresh token. Err of a failure wraps
// ErrClientRejected, or ErrClientUnchecked: a warning when the endpoint
// answered neither way, a failure when it could not be asked.
func (s *TokenSource) ProbeClient(ctx context.Context) paysync.Check {
	id := s.conf.ClientID
	check := func(level paysync.CheckLevel, err error, format string, a ...any) paysync.Check {
		return paysync.Checked(level, err, redact(fmt.Sprintf(format, a...), s.secrets()))
	}
	if s.Refreshes() > 0 {
		return check(paysync.CheckOK, nil, "client id %s and its secret accepted: the token endpoint granted a refresh with them", id)
	}
	err := s.CheckClient(ctx)
	var ce *ClientCheckError
	switch {
	case err == nil:
		return check(paysync.CheckOK, nil, "client id %s and its secret accepted by the token endpoint (asked with a refresh token that cannot be valid: "+
			"it accepted the client, then refused that token; the connection's refresh token was not sent)", id)
	case errors.Is(err, ErrClientRejected):
		detail := fmt.Sprintf("the token endpoint refused client id %s with the configured secret (%v)", id, err)
		if exp, ok := s.Current(); ok && s.now().Before(exp) {
			detail += fmt.Sprintf("; the stored access token still works until %s, then every refresh will fail", exp.UTC().Format(time.RFC3339))
		}
		return check(paysync.CheckFail, err, "%s", detail)
	case errors.As(err, &ce) && ce.Status < 500:
		return check(paysync.CheckWarn, fmt.Errorf("%w: %w", ErrClientUnchecked, err),
			"could not check client id %s and its secret without spending the refresh token: the token endpoint answered a refresh token that cannot be valid with %v, "+
				"neither invalid_grant (client accepted) nor invalid_client (refused)", id, err)
	}
	return check(paysync.CheckFail, fmt.Errorf("%w: %w", ErrClientUnchecked, err), "could not check client id %s and its secret: %v", id, err)
}

// SchemaProbe says what ProbeSchema compares the server's schema with, and
// names it in the details as the operator configured it.
type SchemaProbe struct {
	// Want is the number type units, rate and amount are to be sent as (0:
	// whatever the server says). To compare it with the server's own, the
	// client probed must not force one (Config.Schema.Numbers 0).
	Want NumberKind
	// WantName names Want as the operator set it, e.g.
	// "PAYSYNC_WIRE_NUMBERS=int"; default "wire numbers " + Want.
	WantName string
	// OverridesName names the client's input type and id type overrides
	// (Config.Schema.InputType and IDType), e.g. "PAYSYNC_INPUT_TYPE /
	// PAYSYNC_ID_TYPE"; default "input type / id type".
	OverridesName string
}

// ProbeSchema reads the schema the client works with, as it does before
// its first call: by introspection, unless Config.Schema.NoProbe, with the
// overrides applied. The detail is the dialect found (number types, the
// *_allowed type, the input and id argument types, whether the server
// deletes pay parts, the employee number
// and e-mail fields). Err of a failure wraps
// ErrSchemaProbe (it could not be read) or ErrWireMismatch (the server's
// number types are not o.Want); of a warning, ErrSchemaUnverified (the
// probe is off: the spec's defaults, not the server's).
func (c *Client) ProbeSchema(ctx context.Context, o SchemaProbe) paysync.Check {
	if o.WantName == "" {
		o.WantName = "wire numbers " + o.Want.String()
	}
	if o.OverridesName == "" {
		o.OverridesName = "input type / id type"
	}
	s, err := c.Schema(ctx)
	if err != nil {
		return c.checked(paysync.CheckFail, fmt.Errorf("%w: %w", ErrSchemaProbe, err), nil, "schema probe failed: %v", err)
	}
	detail := fmt.Sprintf("%s; %s; input type %s; id arguments %s, %s", s.DescribeDialect(), s.Describe(), s.InputTypeName, s.CreateCompanyID, s.PayPartIDsType)
	if c.cfg.Schema.InputType != "" || c.cfg.Schema.IDType != "" {
		detail += " (with " + o.OverridesName + " overrides)"
	}
	if c.cfg.Schema.NoProbe {
		return c.checked(paysync.CheckWarn, ErrSchemaUnverified, nil, "%s; %s", detail, s.DescribeEmployees())
	}
	if o.Want != 0 {
		var differ []string
		for _, f := range paysync.Fields {
			for _, m := range []map[paysync.Field]Encoding{s.In, s.Out} {
				if e, ok := m[f]; ok && e.Kind != o.Want {
					differ = append(differ, fmt.Sprintf("%s is %s", f, e.Kind))
					break
				}
			}
		}
		if len(differ) > 0 {
			return c.checked(paysync.CheckFail, ErrWireMismatch, nil, "%s disagrees with the server: %s (%s)", o.WantName, strings.Join(differ, ", "), detail)
		}
		detail += "; " + o.WantName + " agrees"
	}
	return c.checked(paysync.CheckOK, nil, nil, "%s; %s", detail, s.DescribeEmployees())
}

// CompanyProbe says which company ProbeCompany checks.
type CompanyProbe struct {
	ID string // the company work goes to; "" = the account's current company
	// IDName names where ID comes from, e.g. "PAYSYNC_COMPANY_ID"; default
	// "the configured company".
	IDName string
	// Current is the account's current company when it is known
	// (TokenCheck.Current): it saves a call.
	Current string
}

// CompanyCheck is what ProbeCompany found.
type CompanyCheck struct {
	paysync.Check
	Company paysync.Company // as read, when it was
	Current string          // the account's current company, when known
	// Visible are the companies the account can see, listed when the
	// company is not one of them (for the caller's hint), when they could
	// be read.
	Visible []paysync.Company
}

// ProbeCompany checks that the company work goes to is visible to the
// account and has employees to pay. Err of a failure wraps
// ErrNoCurrentCompany (none configured, and the current one cannot be
// read), ErrCompanyNotFound (not visible), ErrNoEmployees, or the error of
// reading the company.
func (c *Client) ProbeCompany(ctx context.Context, o CompanyProbe) CompanyCheck {
	res := CompanyCheck{Current: o.Current}
	fail := func(err error, format string, a ...any) CompanyCheck {
		res.Check = c.checked(paysync.CheckFail, err, nil, format, a...)
		return res
	}
	if o.IDName == "" {
		o.IDName = "the configured company"
	}
	id, how := o.ID, o.IDName
	if id == "" {
		id, how = res.Current, "the account's current company"
		if id == "" {
			cur, err := c.CurrentCompany(ctx)
			if err != nil {
				return fail(fmt.Errorf("%w: %w", ErrNoCurrentCompany, err), "find the current company: %v", err)
			}
			id, res.Current = cur, cur
		}
	}
	co, err := c.Company(ctx, id)
	switch {
	case errors.Is(err, ErrCompanyNotFound):
		res.Visible, _ = c.Companies(ctx, nil) // only for the hint
		return fail(err, "company %s (%s) is not visible to this payroll account", id, how)
	case err != nil:
		return fail(err, "company %s: %v", id, err)
	}
	res.Company = co
	if len(co.Employees) == 0 {
		return fail(ErrNoEmployees, "%s (%s, %s) has no employees: nothing can be paid", co.Name, co.ID, how)
	}
	res.Check = c.checked(paysync.CheckOK, nil, nil, "%s (%s, %s): %d employees", co.Name, co.ID, how, len(co.Employees))
	return res
}

// checked returns a Check whose detail has none of the client's secrets,
// nor those in extra.
func (c *Client) checked(level paysync.CheckLevel, err error, extra []string, format string, a ...any) paysync.Check {
	return paysync.Checked(level, err, redact(fmt.Sprintf(format, a...), append(c.ts.secrets(), extra...)))
}

// secrets are the token source's secrets as they are now: the client
// secret, the configured, current and last refused refresh tokens and the
// access token.
func (s *TokenSource) secrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []string{s.conf.ClientSecret, s.init, s.rt, s.refused, s.bad}
	if s.cur != nil {
		out = append(out, s.cur.AccessToken)
	}
	return out
}

// redact hides each secret in s (one too short to be told from ordinary
// text is left alone).
func redact(s string, secrets []string) string {
	for _, sec := range secrets {
		if len(sec) >= 4 {
			s = strings.ReplaceAll(s, sec, "***")
		}
	}
	return s
}
