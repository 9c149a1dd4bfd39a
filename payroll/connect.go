package payroll

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// The client side of the partner connect flow (Danløn's guide;
// payroll-api-facts §5): authorization code with offline_access, the
// temporary tokens, the marketplace's select-company, and code2token's
// final refresh token, scoped to the company the user chose. Nothing of it
// is a secret worth keeping until code2token answered.

// DefaultMarketplaceURL is Danløn's marketplace (select-company, code2token).
const DefaultMarketplaceURL = "https://danlon.lessor.dk"

// ConnectScope is the scope the connect flow asks for: offline_access
// makes the final refresh token an offline token.
const ConnectScope = "openid email offline_access"

// ConnectConfig configures the connect flow.
type ConnectConfig struct {
	AuthURL      string // Keycloak base URL (as TokenConfig)
	Realm        string
	ClientID     string
	ClientSecret string
	Marketplace  string       // marketplace base URL (default DefaultMarketplaceURL)
	HTTPClient   *http.Client // default: 30 s timeout
}

func (c ConnectConfig) hc() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return &http.Client{Timeout: 30 * time.Second}
}

func (c ConnectConfig) oauth(redirectURI string) *oauth2.Config {
	base := trimSlash(c.AuthURL) + "/auth/realms/" + c.Realm + "/protocol/openid-connect/"
	return &oauth2.Config{
		ClientID:     c.ClientID,
		ClientSecret: c.ClientSecret,
		Endpoint:     oauth2.Endpoint{AuthURL: base + "auth", TokenURL: base + "token", AuthStyle: oauth2.AuthStyleInParams},
		RedirectURL:  redirectURI,
		Scopes:       strings.Fields(ConnectScope),
	}
}

// AuthCodeURL is where the browser starts: the authorization endpoint
// with response_type=code, the connect scope, redirectURI and state.
func (c ConnectConfig) AuthCodeURL(redirectURI, state string) string {
	return c.oauth(redirectURI).AuthCodeURL(state)
}

// Exchange trades the authorization code for the temporary tokens.
func (c ConnectConfig) Exchange(ctx context.Context, code, redirectURI string) (*oauth2.Token, error) {
	ctx = context.WithValue(ctx, oauth2.HTTPClient, c.hc())
	tok, err := c.oauth(redirectURI).Exchange(ctx, code)
	if err != nil {
		return nil, fmt.Errorf("exchange the authorization code: %w", oauthErr(err))
	}
	return tok, nil
}

// SelectCompanyURL is the marketplace page where the user picks the
// company; it redirects to returnURI with code and company_id. The token
// is passed as it is (Danløn's encoding of it is not published).
func (c ConnectConfig) SelectCompanyURL(accessToken, returnURI string) string {
	return c.marketplace() + "/select-company?" + url.Values{"token": {accessToken}, "return_uri": {returnURI}}.Encode()
}

func (c ConnectConfig) marketplace() string {
	if c.Marketplace == "" {
		return DefaultMarketplaceURL
	}
	return trimSlash(c.Marketplace)
}

// CodeToToken trades select-company's code for the final tokens
// (GET {marketplace}/code2token/{code}, the path form of Danløn's demo).
func (c ConnectConfig) CodeToToken(ctx context.Context, code string) (*oauth2.Token, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.marketplace()+"/code2token/"+url.PathEscape(code), nil)
	if err != nil {
		return nil, fmt.Errorf("code2token: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc().Do(req)
	if err != nil {
		return nil, fmt.Errorf("code2token: %w", withoutURL(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("code2token: %w", err)
	}
	var tr struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
		ExpiresIn    int64  `json:"expires_in"`
		Error        string `json:"error"`
		Description  string `json:"error_description"`
	}
	_ = json.Unmarshal(body, &tr)
	switch {
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("code2token: HTTP %d %s", resp.StatusCode, strings.TrimSpace(tr.Error+" "+tr.Description))
	case tr.RefreshToken == "":
		return nil, errors.New("code2token: the answer holds no refresh token")
	}
	tok := &oauth2.Token{AccessToken: tr.AccessToken, RefreshToken: tr.RefreshToken, TokenType: "Bearer"}
	if tr.ExpiresIn > 0 {
		tok.Expiry = time.Now().Add(time.Duration(tr.ExpiresIn) * time.Second)
	}
	return tok, nil
}

// Revoke revokes a refresh token at the token endpoint's revoke (RFC
// 7009): its session ends, with its access tokens. An unknown token is no
// error (the server says 200).
func (c ConnectConfig) Revoke(ctx context.Context, refreshToken string) error {
	u := trimSlash(c.AuthURL) + "/auth/realms/" + c.Realm + "/protocol/openid-connect/revoke"
	form := url.Values{"client_id": {c.ClientID}, "client_secret": {c.ClientSecret}, "token": {refreshToken}, "token_type_hint": {"refresh_token"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.hc().Do(req)
	if err != nil {
		return fmt.Errorf("revoke: %w", withoutURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var oe struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&oe)
		return fmt.Errorf("revoke: HTTP %d %s", resp.StatusCode, strings.TrimSpace(oe.Error+" "+oe.Description))
	}
	return nil
}

// oauthErr keeps a token endpoint's error code and description and drops
// its body (which may echo what was sent).
func oauthErr(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode != "" {
			return fmt.Errorf("%s %s", re.ErrorCode, re.ErrorDescription)
		}
		if re.Response != nil {
			return fmt.Errorf("token endpoint answered HTTP %d", re.Response.StatusCode)
		}
	}
	return withoutURL(err)
}

// withoutURL is a transport error without the URL a *url.Error names:
// code2token's path carries the marketplace code, redeemable for the
// final refresh token, and these errors are printed on stderr and on the
// browser's page.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		return ue.Err
	}
	return err
}
