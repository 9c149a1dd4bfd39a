package payroll_test

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll"
	"github.com/paysync/paysync/payroll/sandbox"
)

// TestClient_FaultClasses injects each sandbox fault into create_pay_parts
// and checks the error class and what the sandbox actually holds.
func TestClient_FaultClasses(t *testing.T) {
	one := []paysync.PayPartInput{item(sandbox.EmpMetteHansen, "T1", "7.5", "", "")}
	tests := []struct {
		name        string
		fault       sandbox.Fault
		timeout     time.Duration
		wantClass   payroll.Class
		wantCreated int    // pay parts the sandbox holds afterwards
		wantReason  string // substring
		retryAfter  time.Duration
	}{
		{name: "5xx before executing", fault: sandbox.Fault{Kind: sandbox.FaultErrorBefore, Op: "create_pay_parts", Status: 503},
			wantClass: payroll.Ambiguous, wantCreated: 0, wantReason: "HTTP 503"},
		{name: "500 before executing", fault: sandbox.Fault{Kind: sandbox.FaultErrorBefore, Op: "create_pay_parts", Status: 500},
			wantClass: payroll.Ambiguous, wantCreated: 0, wantReason: "HTTP 500"},
		{name: "429 with Retry-After", fault: sandbox.Fault{Kind: sandbox.FaultRateLimit, Op: "create_pay_parts", RetryAfter: 7 * time.Second},
			wantClass: payroll.NotApplied, wantCreated: 0, wantReason: "429", retryAfter: 7 * time.Second},
		{name: "401 twice", fault: sandbox.Fault{Kind: sandbox.FaultUnauthorized, Op: "create_pay_parts"},
			wantClass: payroll.NotApplied, wantCreated: 0, wantReason: "401"},
		{name: "response dropped after commit", fault: sandbox.Fault{Kind: sandbox.FaultDropAfterCommit, Op: "create_pay_parts"},
			wantClass: payroll.Ambiguous, wantCreated: 1, wantReason: "request sent"},
		{name: "502 HTML after commit", fault: sandbox.Fault{Kind: sandbox.FaultBadGatewayAfterCommit, Op: "create_pay_parts"},
			wantClass: payroll.Ambiguous, wantCreated: 1, wantReason: "HTML"},
		{name: "timeout after commit", fault: sandbox.Fault{Kind: sandbox.FaultTimeoutAfterCommit, Op: "create_pay_parts", Delay: 3 * time.Second},
			timeout: 300 * time.Millisecond, wantClass: payroll.Ambiguous, wantCreated: 1, wantReason: "request sent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := startSandbox(t, sandbox.Options{})
			cfg := e.config(t)
			if tt.timeout > 0 {
				cfg.Timeout = tt.timeout
			}
			c, err := payroll.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx := ctxT(t)
			if _, err := c.Schema(ctx); err != nil {
				t.Fatal(err)
			}
			e.sb.SetFaults(tt.fault)
			_, err = c.CreatePayParts(ctx, sandbox.CompanyNordlys, one)
			var pe *payroll.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *payroll.Error", err)
			}
			if pe.Class != tt.wantClass {
				t.Errorf("class = %s, want %s (%v)", pe.Class, tt.wantClass, pe)
			}
			if !strings.Contains(pe.Error(), tt.wantReason) {
				t.Errorf("error %q does not mention %q", pe.Error(), tt.wantReason)
			}
			if pe.RetryAfter != tt.retryAfter {
				t.Errorf("RetryAfter = %s, want %s", pe.RetryAfter, tt.retryAfter)
			}
			if got := len(stateParts(e.sb.State(), sandbox.CompanyNordlys)); got != tt.wantCreated {
				t.Errorf("sandbox holds %d pay parts, want %d", got, tt.wantCreated)
			}
		})
	}
}

func TestClient_UnauthorizedOnceRefreshesAndRetries(t *testing.T) {
	e := startSandbox(t, sandbox.Options{Rotate: true})
	c := e.client(t)
	ctx := ctxT(t)
	if _, err := c.Schema(ctx); err != nil {
		t.Fatal(err)
	}
	before := c.Tokens().Refreshes()
	e.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultUnauthorized, Op: "create_pay_parts", Times: 1})
	created, err := c.CreatePayParts(ctx, sandbox.CompanyNordlys, []paysync.PayPartInput{item(sandbox.EmpMetteHansen, "T1", "1", "", "")})
	if err != nil {
		t.Fatalf("CreatePayParts after one 401: %v", err)
	}
	if len(created) != 1 || len(stateParts(e.sb.State(), sandbox.CompanyNordlys)) != 1 {
		t.Fatalf("want exactly one pay part, got %d created", len(created))
	}
	if got := c.Tokens().Refreshes() - before; got != 1 {
		t.Errorf("refreshes after 401 = %d, want 1", got)
	}
}

func TestClient_QueriesRetryHonouringRetryAfter(t *testing.T) {
	e := startSandbox(t, sandbox.Options{})
	c := e.client(t)
	ctx := ctxT(t)
	if _, err := c.Schema(ctx); err != nil {
		t.Fatal(err)
	}
	e.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultRateLimit, Op: "pay_parts_meta", Times: 1, RetryAfter: time.Second})
	start := time.Now()
	if _, err := c.PayPartsMeta(ctx); err != nil {
		t.Fatalf("PayPartsMeta after one 429: %v", err)
	}
	if waited := time.Since(start); waited < time.Second {
		t.Errorf("retried after %s, before Retry-After (1s)", waited)
	}
}

func TestClient_MutationsAreNeverRetried(t *testing.T) {
	e := startSandbox(t, sandbox.Options{})
	c := e.client(t)
	ctx := ctxT(t)
	if _, err := c.Schema(ctx); err != nil {
		t.Fatal(err)
	}
	e.sb.SetFaults(sandbox.Fault{Kind: sandbox.FaultRateLimit, Op: "create_pay_parts", Times: 1})
	_, err := c.CreatePayParts(ctx, sandbox.CompanyNordlys, []paysync.PayPartInput{item(sandbox.EmpMetteHansen, "T1", "1", "", "")})
	if payroll.ClassOf(err) != payroll.NotApplied {
		t.Fatalf("err = %v, want not applied", err)
	}
	if n := e.sb.State().Counters.Faults[sandbox.FaultRateLimit]; n != 1 {
		t.Errorf("create was sent %d times, want 1", n)
	}
}

func TestClient_Rejected(t *testing.T) {
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			e := startSandbox(t, sandbox.Options{Numbers: v.numbers, Allowed: v.allowed})
			c := e.client(t)
			items := []paysync.PayPartInput{
				item(sandbox.EmpMetteHansen, "T1", "7.5", "", ""),
				item(sandbox.EmpLarsNielsen, "T1", "2", "", "10"), // amount is forbidden for T1
			}
			_, err := c.CreatePayParts(ctxT(t), sandbox.CompanyNordlys, items)
			var pe *payroll.Error
			if !errors.As(err, &pe) || pe.Class != payroll.Rejected || pe.Index != 1 {
				t.Fatalf("err = %#v, want rejected at index 1", err)
			}
			if left := stateParts(e.sb.State(), sandbox.CompanyNordlys); len(left) != 0 {
				t.Errorf("all-or-nothing: sandbox holds %d", len(left))
			}
		})
	}
}

func TestClient_InexactNumbersNeverSent(t *testing.T) {
	e := startSandbox(t, sandbox.Options{Numbers: sandbox.NumbersInt})
	c := e.client(t)
	ctx := ctxT(t)
	if _, err := c.Schema(ctx); err != nil {
		t.Fatal(err)
	}
	before := e.sb.State().Counters.Requests["create_pay_parts"]
	_, err := c.CreatePayParts(ctx, sandbox.CompanyNordlys, []paysync.PayPartInput{
		item(sandbox.EmpMetteHansen, "T1", "7.5", "", ""),
		item(sandbox.EmpMetteHansen, "T1", "7.125", "", ""),
	})
	var pe *payroll.Error
	if !errors.As(err, &pe) || pe.Class != payroll.Rejected || pe.Index != 1 || !strings.Contains(pe.Error(), "units") {
		t.Fatalf("err = %v, want rejected item 1 units", err)
	}
	if after := e.sb.State().Counters.Requests["create_pay_parts"]; after != before {
		t.Errorf("an inexact value was sent (%d requests)", after-before)
	}
}

func TestClient_ValidationErrorIsNotApplied(t *testing.T) {
	e := startSandbox(t, sandbox.Options{})
	cfg := e.config(t)
	// A wrong input type name makes the server refuse the document.
	cfg.Schema = payroll.SchemaOverrides{NoProbe: true, Numbers: payroll.Float, InputType: "PayPartsInputWrong"}
	c, err := payroll.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CreatePayParts(ctxT(t), sandbox.CompanyNordlys, []paysync.PayPartInput{item(sandbox.EmpMetteHansen, "T1", "1", "", "")})
	if payroll.ClassOf(err) != payroll.NotApplied || !strings.Contains(err.Error(), "validation") {
		t.Fatalf("err = %v, want not applied (validation)", err)
	}
	if n := len(stateParts(e.sb.State(), sandbox.CompanyNordlys)); n != 0 {
		t.Fatalf("sandbox holds %d", n)
	}
}

func TestClient_ConnectionRefusedIsNotApplied(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := payroll.New(payroll.Config{URL: "http://" + addr, Realm: "r", ClientID: "x", RefreshToken: "rt", QueryRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.PayPartsMeta(ctxT(t))
	if payroll.ClassOf(err) != payroll.NotApplied || !strings.Contains(err.Error(), addr) {
		t.Fatalf("err = %v, want not applied naming %s", err, addr)
	}
	if strings.Contains(err.Error(), "rt") && strings.Contains(err.Error(), "refresh_token=rt") {
		t.Fatalf("error leaks the refresh token: %v", err)
	}
}

func TestClient_RevokedIsTyped(t *testing.T) {
	e := startSandbox(t, sandbox.Options{Rotate: true})
	c := e.client(t)
	e.sb.RevokeAll()
	_, err := c.PayPartsMeta(ctxT(t))
	if !errors.Is(err, payroll.ErrRevoked) || payroll.ClassOf(err) != payroll.Revoked {
		t.Fatalf("err = %v, want revoked", err)
	}
	if !strings.Contains(err.Error(), "re-connect the payroll account") {
		t.Errorf("message %q does not tell what to do", err)
	}
}

func TestClient_UnknownCompany(t *testing.T) {
	e := startSandbox(t, sandbox.Options{})
	c := e.client(t)
	_, err := c.Employees(ctxT(t), sandbox.CompanyHavblik, nil)
	if !errors.Is(err, payroll.ErrCompanyNotFound) || !strings.Contains(err.Error(), sandbox.CompanyHavblik) {
		t.Fatalf("err = %v, want company not found naming it", err)
	}
}

func TestClient_LatencyFaultStillSucceeds(t *testing.T) {
	e := startSandbox(t, sandbox.Options{Faults: []sandbox.Fault{{Kind: sandbox.FaultLatency, Delay: 50 * time.Millisecond}}})
	c := e.client(t)
	start := time.Now()
	if _, err := c.PayPartsMeta(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Error("latency fault did not apply")
	}
}
