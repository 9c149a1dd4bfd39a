package payroll

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// StoreInfo is implemented by token stores that can name themselves and
// find other stores holding a refresh token rotated from the same initial
// token. With it, a store that has none of its own never spends an
// initial token another store has already rotated: with rotation that
// token is used up, and a Keycloak realm that sees it again refuses it as
// reused and ends the session the other store still holds. And a refused
// initial token is explained.
type StoreInfo interface {
	// Where names the store for messages, e.g. "ledger /var/lib/paysync/ledger.db".
	Where() string
	// RotatedElsewhere names the other stores that hold a refresh token
	// rotated from the initial token with fingerprint seed (not the
	// initial token itself), and says where it looked.
	RotatedElsewhere(ctx context.Context, seed string) (found []string, lookedIn []string)
}

// InitialTokenError: the store has no refresh token of its own, and the
// configured initial token cannot serve it. Either another store already
// rotated it (Err is nil: it was not sent), or the server refused it (Err
// is the refusal). The connection is unusable until an operator acts,
// like a revoked one.
type InitialTokenError struct {
	Store    string   // this store, from StoreInfo.Where
	Seed     string   // fingerprint of the initial token
	Others   []string // stores holding a token rotated from it
	LookedIn []string // where they were looked for
	Err      error    // the server's refusal; nil when the token was not sent
}

func (e *InitialTokenError) Error() string {
	var b strings.Builder
	if e.Err == nil {
		fmt.Fprintf(&b, "%s has no refresh token of its own, and PAYSYNC_REFRESH_TOKEN (fingerprint %s) was already used: %s holds the token it was rotated to. "+
			"paysync did not send it (the payroll server would refuse it as reused, and may then end that connection too). "+
			"Point paysync at that store (PAYSYNC_LEDGER, or PAYSYNC_TOKEN_FILE for a token file), "+
			"or connect paysync to the payroll account again and set PAYSYNC_REFRESH_TOKEN to the new refresh token for this one",
			e.Store, e.Seed, strings.Join(e.Others, " and "))
		return b.String()
	}
	// Refused: the server cannot tell a revoked token from a used one (nor
	// can paysync), so both are said.
	fmt.Fprintf(&b, "%s (the payroll server refused the refresh token: %s). %s has no refresh token of its own, so paysync used PAYSYNC_REFRESH_TOKEN (fingerprint %s); "+
		"if it was used before, by another ledger or token file, it was rotated there (with rotation every refresh token works once)",
		ErrRevoked, refusal(e.Err), e.Store, e.Seed)
	switch {
	case len(e.Others) > 0:
		fmt.Fprintf(&b, ": %s holds a token rotated from it", strings.Join(e.Others, " and "))
	case len(e.LookedIn) > 0:
		fmt.Fprintf(&b, " (none holding it was found in %s)", strings.Join(e.LookedIn, ", "))
	}
	b.WriteString(": point PAYSYNC_LEDGER (or PAYSYNC_TOKEN_FILE) at that one instead. Otherwise, or if the server ended that connection too when it saw the used token again, " +
		"connect paysync to the payroll account again and set PAYSYNC_REFRESH_TOKEN to the new refresh token")
	return b.String()
}

func (e *InitialTokenError) Unwrap() error { return e.Err }

// refusal describes a token endpoint's refusal without its raw body.
func refusal(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if s := strings.TrimSpace(re.ErrorCode + ": " + re.ErrorDescription); s != ":" {
			return strings.TrimSuffix(s, ":")
		}
		if re.Response != nil {
			return fmt.Sprintf("HTTP %d", re.Response.StatusCode)
		}
	}
	return err.Error()
}

// unspentLocked refuses to spend the configured initial token for a store
// that has none of its own when another store already rotated it.
func (s *TokenSource) unspentLocked(ctx context.Context) error {
	if !s.fromEmpty || s.rt != s.init || s.unsaved {
		return nil
	}
	info, ok := s.store.(StoreInfo)
	if !ok {
		return nil
	}
	others, looked := info.RotatedElsewhere(ctx, s.seed)
	if len(others) == 0 {
		return nil
	}
	return &InitialTokenError{Store: info.Where(), Seed: s.seed, Others: others, LookedIn: looked}
}

// explainRefusedLocked turns the server's refusal of the initial token,
// spent for a store that has none of its own, into an InitialTokenError.
func (s *TokenSource) explainRefusedLocked(ctx context.Context, err error) error {
	if !refusedGrant(err) || !s.fromEmpty || s.rt != s.init {
		return err
	}
	e := &InitialTokenError{Store: "the token store", Seed: s.seed, Err: err}
	if info, ok := s.store.(StoreInfo); ok {
		e.Store = info.Where()
		e.Others, e.LookedIn = info.RotatedElsewhere(ctx, s.seed)
	}
	return e
}

// ErrClientRejected is matched (errors.Is) by a CheckClient error that
// says the token endpoint refused the client id or secret.
var ErrClientRejected = errors.New("the token endpoint refused the client credentials")

// ClientCheckError is the token endpoint's answer to CheckClient when it
// did not accept the client: Rejected when it refused the client itself.
type ClientCheckError struct {
	Status      int
	Code        string
	Description string
	Rejected    bool
}

func (e *ClientCheckError) Error() string {
	s := fmt.Sprintf("token endpoint: HTTP %d", e.Status)
	if e.Code != "" {
		s += " " + strings.TrimSuffix(e.Code+": "+e.Description, ": ")
	}
	return s
}

func (e *ClientCheckError) Is(target error) bool { return target == ErrClientRejected && e.Rejected }

// clientCheckToken is a refresh token no server can have issued (not even
// a decodable one), so a grant with it touches no session.
const clientCheckToken = "paysync-client-check.not-a-refresh-token"

// CheckClient asks the token endpoint whether it accepts the client id and
// secret without spending, or even sending, the connection's refresh
// token: it sends a refresh_token grant with a token that cannot be valid.
// The server authenticates the client before it looks at the token
// (Keycloak does, and so does the sandbox), so invalid_grant means the
// client was accepted and invalid_client (HTTP 401) that it was not. It
// returns nil, an error matching ErrClientRejected, or another error when
// the answer says neither (the server could not be asked).
func (s *TokenSource) CheckClient(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cctx = context.WithValue(cctx, oauth2.HTTPClient, s.hc)
	_, err := s.conf.TokenSource(cctx, &oauth2.Token{RefreshToken: clientCheckToken}).Token()
	var re *oauth2.RetrieveError
	switch {
	case err == nil:
		return errors.New("token endpoint: it accepted a refresh token that cannot be valid")
	case errors.As(err, &re):
		e := &ClientCheckError{Code: re.ErrorCode, Description: re.ErrorDescription}
		if re.Response != nil {
			e.Status = re.Response.StatusCode
		}
		switch {
		case e.Code == "invalid_grant":
			return nil
		case e.Code == "invalid_client", e.Code == "unauthorized_client", e.Status == 401:
			e.Rejected = true
		}
		return e
	}
	return fmt.Errorf("token endpoint: %w", err)
}
