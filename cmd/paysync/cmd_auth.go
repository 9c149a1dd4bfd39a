package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/paysync/paysync/payroll"
)

func runAuth(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	if len(args) == 0 {
		return usagef("auth: want a subcommand: 'auth status' or 'auth password' (test only)")
	}
	switch args[0] {
	case "status":
		return runAuthStatus(ctx, args[1:], io, env)
	case "password":
		return runAuthPassword(ctx, args[1:], io, env)
	case "-h", "--help":
		fmt.Fprintln(io.out, "Usage: paysync auth status [--json]\n       paysync auth password --username U [--save]   (TEST ONLY)")
		return nil
	}
	return usagef("auth: unknown subcommand %q (want status or password)", args[0])
}

type authStatus struct {
	GraphQLURL         string    `json:"graphql_url"`
	TokenURL           string    `json:"token_url"`
	ClientID           string    `json:"client_id"`
	TokenFile          string    `json:"token_file"`
	ConfiguredToken    string    `json:"configured_refresh_token_fingerprint,omitempty"`
	StoredToken        string    `json:"stored_refresh_token_fingerprint,omitempty"`
	StoredFromConfig   bool      `json:"stored_descends_from_configured"`
	AccessTokenExpiry  time.Time `json:"access_token_expiry"`
	RotatedNow         bool      `json:"rotated_now"`
	CurrentCompany     string    `json:"current_company"`
	Schema             string    `json:"schema"`
	RefreshTokenSource string    `json:"refresh_token_source"`
}

func runAuthStatus(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	var asJSON bool
	s, err := apiSetup(ctx, "auth status", "auth status [--json]", args, io, env, func(fs *flag.FlagSet) {
		fs.BoolVar(&asJSON, "json", false, "print JSON")
	})
	if err != nil {
		return err
	}
	defer s.Close()
	cfg, cl := s.cfg, s.cl
	authURL := cfg.AuthURL
	if authURL == "" {
		authURL = cfg.PayrollURL
	}
	st := authStatus{
		GraphQLURL:      cl.GraphQLURL(),
		TokenURL:        payroll.TokenURL(authURL, cfg.AuthRealm),
		ClientID:        cfg.ClientID,
		TokenFile:       tokenPlace(s),
		ConfiguredToken: payroll.Fingerprint(string(cfg.RefreshToken)),
	}
	store := s.tokenStore()
	before, lerr := store.Load(ctx)
	switch {
	case lerr == nil:
		st.StoredToken = payroll.Fingerprint(before.RefreshToken)
		st.StoredFromConfig = before.Seed == st.ConfiguredToken
	case !errors.Is(lerr, payroll.ErrNoStoredToken):
		return fmt.Errorf("auth status: %w", lerr)
	}
	switch {
	case st.StoredToken != "" && (st.ConfiguredToken == "" || st.StoredFromConfig):
		st.RefreshTokenSource = "token store (rotated from the configured token)"
	case st.ConfiguredToken != "":
		st.RefreshTokenSource = "PAYSYNC_REFRESH_TOKEN"
	default:
		st.RefreshTokenSource = "none"
	}
	id, err := cl.CurrentCompany(ctx)
	if err != nil {
		return err
	}
	st.CurrentCompany = id
	exp, _ := cl.Tokens().Current()
	st.AccessTokenExpiry = exp.UTC()
	if after, err := store.Load(ctx); err == nil {
		st.RotatedNow = payroll.Fingerprint(after.RefreshToken) != st.StoredToken
		st.StoredToken = payroll.Fingerprint(after.RefreshToken)
	}
	schema, err := cl.Schema(ctx)
	if err != nil {
		return err
	}
	st.Schema = schema.Describe()
	if asJSON {
		return writeJSON(io.out, st)
	}
	t := newKV(io.out)
	t.row("connection", "OK ✓")
	t.row("graphql", st.GraphQLURL)
	t.row("token endpoint", st.TokenURL)
	t.row("client id", st.ClientID)
	t.row("refresh token from", st.RefreshTokenSource)
	t.row("token store", st.TokenFile+" (mode 0600)")
	if st.StoredToken != "" {
		rot := "not rotated by this refresh"
		if st.RotatedNow {
			rot = "rotated by this refresh, new one saved"
		}
		t.row("stored token", "fingerprint "+st.StoredToken+", "+rot)
	}
	t.row("access token", fmt.Sprintf("valid until %s (%s)", utcTime(st.AccessTokenExpiry), time.Until(exp).Round(time.Second)))
	t.row("current company", st.CurrentCompany)
	t.row("schema", st.Schema)
	return t.flush()
}

func runAuthPassword(ctx context.Context, args []string, io stdio, env lookupEnv) error {
	cfg, err := loadConfig(ctx, env)
	if err != nil {
		return err
	}
	var username string
	var save bool
	fs := newFlagSet("auth password", "auth password --username U [--save]   (TEST ONLY)", io)
	cfg.apiFlags(fs)
	fs.StringVar(&username, "username", "", "payroll user name (test or sandbox account)")
	fs.BoolVar(&save, "save", false, "store the refresh token in the token file instead of printing it")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := cfg.validate(); err != nil {
		return err
	}
	if username == "" {
		return usagef("auth password: --username is required")
	}
	fmt.Fprintln(io.err, "paysync: 'auth password' is a TEST-ONLY helper for sandbox and demo accounts (the OAuth2 password grant). Production access uses the refresh token from connecting paysync in the payroll system; never ask a user for payroll credentials.")
	password, ok := env("PAYSYNC_PASSWORD")
	if !ok {
		if f, isFile := io.in.(*os.File); isFile && isTerminal(f) {
			fmt.Fprint(io.err, "password: ")
		}
		line, err := bufio.NewReader(io.in).ReadString('\n')
		if err != nil && line == "" {
			return usagef("auth password: no password: set PAYSYNC_PASSWORD or pipe it on standard input")
		}
		password = strings.TrimRight(line, "\r\n")
	}
	authURL := cfg.AuthURL
	if authURL == "" {
		authURL = cfg.PayrollURL
	}
	tok, err := payroll.PasswordGrant(ctx, payroll.TokenConfig{
		AuthURL: authURL, Realm: cfg.AuthRealm, ClientID: cfg.ClientID, ClientSecret: string(cfg.ClientSecret),
	}, username, password)
	if err != nil {
		return err
	}
	if tok.RefreshToken == "" {
		return errors.New("auth password: the server returned no refresh token")
	}
	if save {
		s, err := cfg.connect(ctx, io, false)
		if err != nil {
			return err
		}
		defer s.Close()
		fp := payroll.Fingerprint(tok.RefreshToken)
		if err := s.tokenStore().Save(ctx, payroll.StoredToken{RefreshToken: tok.RefreshToken, Seed: fp}); err != nil {
			return fmt.Errorf("auth password: save: %w", err)
		}
		fmt.Fprintf(io.out, "refresh token saved to %s (fingerprint %s); leave PAYSYNC_REFRESH_TOKEN unset to use it\n", tokenPlace(s), fp)
		return nil
	}
	fmt.Fprintln(io.out, tok.RefreshToken)
	return nil
}

// tokenPlace names where the rotated refresh token is kept.
func tokenPlace(s *session) string {
	if s.led != nil && s.cfg.TokenFile == "" {
		return "ledger " + s.led.Path()
	}
	return s.cfg.tokenFile()
}
