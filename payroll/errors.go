package payroll

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	graphql "github.com/hasura/go-graphql-client"
	"github.com/paysync/paysync"
	"golang.org/x/oauth2"
)

// Class says what a failed call means for the caller's next step: the
// shared paysync.FailureKind.
type Class = paysync.FailureKind

// The error classes (paysync's failure kinds). Every error returned by a
// Client method is an *Error carrying one of them.
const (
	NotApplied = paysync.NotApplied
	Rejected   = paysync.Rejected
	Ambiguous  = paysync.Ambiguous
	Revoked    = paysync.Revoked
)

// ErrRevoked is matched (errors.Is) by every Revoked error.
var ErrRevoked = errors.New("connection revoked: re-connect the payroll account")

// Error is the error of every Client call.
type Error struct {
	Op         string        // operation name, e.g. "CreatePayParts"
	Class      Class         // what the caller may do next
	StatusCode int           // HTTP status when one was received, else 0
	RetryAfter time.Duration // server's Retry-After, if any
	Index      int           // offending item index for Rejected, -1 when unknown
	Field      string        // offending field when the server names one
	Reason     string        // short, secret-free description
	Err        error         // underlying cause
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("payroll: ")
	b.WriteString(opWords(e.Op))
	b.WriteString(": ")
	if e.Class == Revoked {
		if ie := (*InitialTokenError)(nil); errors.As(e.Err, &ie) {
			b.WriteString(ie.Error()) // says what happened and what to do
			return b.String()
		}
		b.WriteString(ErrRevoked.Error())
		if e.Reason != "" {
			b.WriteString(" (" + e.Reason + ")")
		}
		return b.String()
	}
	b.WriteString(e.Class.String())
	if e.Reason != "" {
		b.WriteString(": " + e.Reason)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %s)", e.RetryAfter)
	}
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// FailureKind is the error's class (paysync.KindOf reads it).
func (e *Error) FailureKind() paysync.FailureKind { return e.Class }

// Is makes errors.Is(err, ErrRevoked) true for Revoked errors.
func (e *Error) Is(target error) bool { return target == ErrRevoked && e.Class == Revoked }

// ClassOf returns the class of err, or 0 if err is not a payroll *Error.
func ClassOf(err error) Class {
	var pe *Error
	if errors.As(err, &pe) {
		return pe.Class
	}
	return 0
}

// opWords turns "CreatePayParts" into "create pay parts" for messages.
func opWords(op string) string {
	var b strings.Builder
	for i, r := range op {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteRune(r + ('a' - 'A'))
			continue
		}
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "call"
	}
	return b.String()
}

// callInfo is filled by the transport during one GraphQL call so that the
// classifier knows whether the request left the machine and what came back.
type callInfo struct {
	wrote      bool // the request was written to the connection
	status     int
	header     http.Header
	refreshErr error // the token source failed: the GraphQL request was never sent
}

var itemIndexRe = regexp.MustCompile(`pay_parts\[(\d+)\]|(?i)\bitem (\d+)\b|(?i)\bindex (\d+)\b`)

// classify maps a failed call to an *Error. mutation says whether the
// operation changes state (ambiguity only matters then, but it is reported
// for queries too).
func classify(op string, info *callInfo, err error) *Error {
	e := &Error{Op: op, Index: -1, Err: err}
	if info != nil {
		e.StatusCode = info.status
		if info.header != nil {
			e.RetryAfter = parseRetryAfter(info.header.Get("Retry-After"), time.Now())
		}
	}

	// The configured initial token cannot serve a store without a token of
	// its own (see InitialTokenError): only an operator can fix that.
	var ie *InitialTokenError
	if errors.As(err, &ie) {
		e.Class, e.Reason = Revoked, ie.Error()
		return e
	}
	// Token endpoint failures: the GraphQL request was never sent.
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode == "invalid_grant" {
			e.Class = Revoked
			e.Reason = "the refresh token was refused: " + strings.TrimSpace(re.ErrorCode+" "+re.ErrorDescription)
			return e
		}
		e.Class = NotApplied
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
			e.RetryAfter = parseRetryAfter(re.Response.Header.Get("Retry-After"), time.Now()) // a throttled token endpoint says when too
		}
		switch {
		case re.ErrorCode != "":
			e.Reason = fmt.Sprintf("token endpoint refused the refresh: %s %s", re.ErrorCode, re.ErrorDescription)
		default:
			e.Reason = fmt.Sprintf("token endpoint answered HTTP %d", status)
		}
		e.Reason = strings.TrimSpace(e.Reason)
		return e
	}
	var se *storeError
	if errors.As(err, &se) {
		e.Class = NotApplied
		e.Reason = se.Error()
		return e
	}

	var ne graphql.NetworkError
	if errors.As(err, &ne) {
		e.StatusCode = ne.StatusCode()
		return classifyStatus(e, ne.Body())
	}

	var gerrs graphql.Errors
	if errors.As(err, &gerrs) && len(gerrs) > 0 {
		code, _ := gerrs[0].Extensions["code"].(string)
		switch code {
		case graphql.ErrRequestError:
			// Transport failure (or a non-2xx handled above).
			return classifyTransport(e, info, gerrs[0].Message)
		case graphql.ErrJsonDecode, graphql.ErrGraphQLDecode:
			e.Class = Ambiguous
			e.Reason = "unreadable response from the payroll API"
			return e
		case graphql.ErrGraphQLEncode, graphql.ErrJsonEncode:
			e.Class = NotApplied
			e.Reason = "encode request: " + gerrs[0].Message
			return e
		}
		return classifyGraphQLErrors(e, gerrs)
	}
	if info != nil && info.refreshErr != nil {
		return classify(op, nil, info.refreshErr)
	}
	return classifyTransport(e, info, err.Error())
}

func classifyTransport(e *Error, info *callInfo, msg string) *Error {
	if info != nil && info.refreshErr != nil {
		c := classify(e.Op, nil, info.refreshErr)
		return c
	}
	if info == nil || !info.wrote {
		e.Class = NotApplied
		e.Reason = "request not sent: " + trimURLError(msg)
		return e
	}
	e.Class = Ambiguous
	e.Reason = "request sent, no usable answer: " + trimURLError(msg)
	return e
}

// trimURLError shortens `Post "http://x/graphql": dial tcp ...: connect: connection refused`
// to keep one readable line; the URL stays, it names the thing.
func trimURLError(msg string) string {
	msg = strings.ReplaceAll(msg, "\n", " ")
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return msg
}

func classifyStatus(e *Error, body string) *Error {
	s := e.StatusCode
	switch {
	case s == http.StatusTooManyRequests:
		e.Class = NotApplied
		e.Reason = "rate limited (HTTP 429)"
	case s == http.StatusUnauthorized:
		e.Class = NotApplied
		e.Reason = "unauthorized (HTTP 401) even after a token refresh"
	case s == http.StatusRequestTimeout:
		e.Class = NotApplied
		e.Reason = "server timed out reading the request (HTTP 408)"
	case s == http.StatusBadRequest:
		// Some servers send GraphQL validation errors with 400: the request
		// was refused before execution.
		e.Class = NotApplied
		e.Reason = "bad request (HTTP 400)"
		if m := graphQLErrorMessage(body); m != "" {
			e.Reason += ": " + m
		}
	case s == http.StatusNotFound:
		e.Class = NotApplied
		e.Reason = "no GraphQL endpoint at this URL (HTTP 404): check PAYSYNC_PAYROLL_URL"
	case s >= 500:
		e.Class = Ambiguous
		e.Reason = fmt.Sprintf("server error (HTTP %d)", s)
		if strings.Contains(strings.ToLower(body), "<html") {
			e.Reason += " with an HTML body (a proxy answered)"
		}
	default:
		e.Class = Rejected
		e.Reason = fmt.Sprintf("refused (HTTP %d)", s)
		if m := graphQLErrorMessage(body); m != "" {
			e.Reason += ": " + m
		}
	}
	return e
}

// graphQLErrorMessage extracts the first GraphQL error message from a body.
func graphQLErrorMessage(body string) string {
	var r struct {
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if json.Unmarshal([]byte(body), &r) == nil && len(r.Errors) > 0 {
		return r.Errors[0].Message
	}
	return ""
}

// classifyGraphQLErrors handles an `errors` array in a 200 response. Errors
// without a path are request errors (syntax, validation, variable coercion):
// nothing executed. Errors with a path come from execution.
func classifyGraphQLErrors(e *Error, gerrs graphql.Errors) *Error {
	first := gerrs[0]
	e.Reason = first.Message
	if len(gerrs) > 1 {
		e.Reason += fmt.Sprintf(" (and %d more)", len(gerrs)-1)
	}
	executed := false
	for _, g := range gerrs {
		if len(g.Path) > 0 {
			executed = true
			first = g
			break
		}
	}
	if !executed {
		e.Class = NotApplied
		e.Reason = "request refused by schema validation: " + e.Reason
		return e
	}
	e.Class = Rejected
	e.Reason = first.Message
	if v, ok := first.Extensions["index"]; ok {
		if f, ok := v.(float64); ok {
			e.Index = int(f)
		}
	}
	if e.Index < 0 {
		for _, p := range first.Path {
			if f, ok := p.(float64); ok {
				e.Index = int(f)
				break
			}
		}
	}
	if e.Index < 0 {
		if m := itemIndexRe.FindStringSubmatch(first.Message); m != nil {
			for _, g := range m[1:] {
				if g != "" {
					e.Index, _ = strconv.Atoi(g)
					break
				}
			}
		}
	}
	if f, ok := first.Extensions["field"].(string); ok {
		e.Field = f
	}
	return e
}

// parseRetryAfter reads delay-seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
