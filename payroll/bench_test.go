package payroll

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	graphql "github.com/hasura/go-graphql-client"
	"github.com/paysync/paysync"
	"github.com/paysync/paysync/payroll/sandbox"
	"github.com/shopspring/decimal"
)

// benchBatch is the number of pay parts in one create_pay_parts call.
const benchBatch = 100

var benchEmployees = []string{sandbox.EmpMetteHansen, sandbox.EmpLarsNielsen, sandbox.EmpSofieJensen, sandbox.EmpAndersPedersen}

// benchItems returns n DIAET inputs (the code that takes units, rate and
// amount) of the fixture company CompanyNordlys. Every number has at most
// two decimals and fits Int hundredths, so both wire forms carry it exactly.
func benchItems(n int) []paysync.PayPartInput {
	out := make([]paysync.PayPartInput, n)
	for i := range out {
		units := decimal.New(int64(100+25*(i%33)), -2) // 1.00 … 9.00
		rate := decimal.New(int64(21550+i), -2)        // 215.50, 215.51, …
		in := paysync.PayPartInput{EmployeeID: benchEmployees[i%len(benchEmployees)], Code: "DIAET"}
		in.Set(paysync.FieldUnits, decimal.NewNullDecimal(units))
		in.Set(paysync.FieldRate, decimal.NewNullDecimal(rate))
		in.Set(paysync.FieldAmount, decimal.NewNullDecimal(units.Mul(rate).Round(2)))
		out[i] = in
	}
	return out
}

// benchSchemas are the two wire forms of units, rate and amount: Float
// decimal text and Int hundredths.
func benchSchemas() []struct {
	name string
	s    Schema
} {
	return []struct {
		name string
		s    Schema
	}{
		{"float", SchemaOverrides{Numbers: Float}.Apply(DefaultSchema())},
		{"int-hundredths", SchemaOverrides{Numbers: Int}.Apply(DefaultSchema())},
	}
}

// requestBody is the HTTP body go-graphql-client's ExecRaw sends for doc
// and vars (its doRequest: a json.Encoder over GraphQLRequestPayload).
func requestBody(buf *bytes.Buffer, op, doc string, vars map[string]any) error {
	buf.Reset()
	return json.NewEncoder(buf).Encode(graphql.GraphQLRequestPayload{Query: doc, Variables: vars, OperationName: op})
}

// BenchmarkCreatePayParts_EncodeRequest builds the create_pay_parts request
// body of 100 items as Client.CreatePayParts does: EncodeInputs for the
// server's number encoding, then the variables and the constant document
// marshalled into the GraphQL request.
func BenchmarkCreatePayParts_EncodeRequest(b *testing.B) {
	items := benchItems(benchBatch)
	for _, sc := range benchSchemas() {
		b.Run(sc.name, func(b *testing.B) {
			doc := buildDocuments(sc.s)[opCreatePayParts]
			var buf bytes.Buffer
			b.ReportAllocs()
			for b.Loop() {
				wire, err := EncodeInputs(sc.s, items)
				if err != nil {
					b.Fatal(err)
				}
				if err := requestBody(&buf, opCreatePayParts, doc, map[string]any{"company_id": sandbox.CompanyNordlys, "pay_parts": wire}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(buf.Len()), "body-bytes")
			checkRequestBody(b, sc.s, buf.Bytes(), items)
		})
	}
}

// checkRequestBody reads the body back and checks every number of every
// item against what was meant, in the schema's wire form.
func checkRequestBody(b *testing.B, s Schema, body []byte, items []paysync.PayPartInput) {
	b.Helper()
	var req struct {
		Query         string `json:"query"`
		OperationName string `json:"operationName"`
		Variables     struct {
			CompanyID string      `json:"company_id"`
			PayParts  []wireInput `json:"pay_parts"`
		} `json:"variables"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		b.Fatalf("request body: %v", err)
	}
	if req.OperationName != opCreatePayParts || req.Variables.CompanyID != sandbox.CompanyNordlys || len(req.Variables.PayParts) != len(items) {
		b.Fatalf("request: op %q company %q, %d pay parts; want %d", req.OperationName, req.Variables.CompanyID, len(req.Variables.PayParts), len(items))
	}
	for i, w := range req.Variables.PayParts {
		raw := map[paysync.Field]json.RawMessage{paysync.FieldUnits: w.Units, paysync.FieldRate: w.Rate, paysync.FieldAmount: w.Amount}
		for _, f := range paysync.Fields {
			got, err := s.In[f].Decode(raw[f])
			if want := items[i].Get(f); err != nil || !got.Valid || !got.Decimal.Equal(want.Decimal) {
				b.Fatalf("pay_parts[%d].%s = %s (%v), want %s", i, f, raw[f], err, want.Decimal)
			}
		}
	}
	// Item 1 has units 1.25: decimal text for Float, hundredths for Int.
	want := map[NumberKind]string{Float: "1.25", Int: "125"}[s.In[paysync.FieldUnits].Kind]
	if got := string(req.Variables.PayParts[1].Units); got != want {
		b.Fatalf("pay_parts[1].units on the wire = %s, want %s", got, want)
	}
}

// createdResponse is the data of a create_pay_parts answer for items, as
// the server sends it (numbers in its wire form, employee with name).
func createdResponse(b *testing.B, s Schema, items []paysync.PayPartInput) []byte {
	b.Helper()
	type wireOut struct {
		ID       string          `json:"id"`
		Code     string          `json:"code"`
		Units    json.RawMessage `json:"units"`
		Rate     json.RawMessage `json:"rate"`
		Amount   json.RawMessage `json:"amount"`
		Employee wireEmployeeRef `json:"employee"`
	}
	name := "Mette Hansen"
	out := make([]wireOut, len(items))
	for i, it := range items {
		w := wireOut{ID: "cHBf" + strconv.Itoa(1000+i), Code: it.Code, Employee: wireEmployeeRef{ID: it.EmployeeID, Name: &name}}
		for _, f := range paysync.Fields {
			raw, err := s.Out[f].Encode(it.Get(f).Decimal)
			if err != nil {
				b.Fatal(err)
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
	data, err := json.Marshal(map[string]any{"create_pay_parts": out})
	if err != nil {
		b.Fatal(err)
	}
	return data
}

// BenchmarkCreatePayParts_DecodeResponse decodes the data of a 100-item
// create_pay_parts answer into []paysync.PayPart as Client.CreatePayParts
// does: unmarshal into the wire structs, decodePayParts for the server's
// number encoding, and matchCreated against the items sent.
func BenchmarkCreatePayParts_DecodeResponse(b *testing.B) {
	items := benchItems(benchBatch)
	for _, sc := range benchSchemas() {
		b.Run(sc.name, func(b *testing.B) {
			data := createdResponse(b, sc.s, items)
			var matched []paysync.PayPart
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				// The same shape CreatePayParts unmarshals into.
				var r struct {
					Created []*wirePayPart `json:"create_pay_parts"`
				}
				if err := json.Unmarshal(data, &r); err != nil {
					b.Fatal(err)
				}
				created, err := decodePayParts(sc.s, r.Created)
				if err != nil {
					b.Fatal(err)
				}
				if matched, err = matchCreated(items, created); err != nil {
					b.Fatal(err)
				}
			}
			if len(matched) != len(items) {
				b.Fatalf("%d pay parts decoded, want %d", len(matched), len(items))
			}
			for i, p := range matched {
				if p.ID == "" || p.EmployeeName != "Mette Hansen" || !p.Numbers.Equal(items[i].Numbers) {
					b.Fatalf("pay part %d = %+v, want %+v", i, p, items[i])
				}
			}
		})
	}
}

// BenchmarkClient_CreatePayParts sends 100 items per create_pay_parts call
// through the real client (token, HTTP, GraphQL library, encode, decode,
// match) to an in-process sandbox on loopback, which validates and stores
// every pay part. It reports pay parts created per second.
func BenchmarkClient_CreatePayParts(b *testing.B) {
	for _, v := range []struct {
		name    string
		numbers sandbox.NumberType
	}{{"float", sandbox.NumbersFloat}, {"int-hundredths", sandbox.NumbersInt}} {
		b.Run(v.name, func(b *testing.B) {
			sb := sandbox.New(sandbox.Options{Numbers: v.numbers})
			url, err := sb.Start("127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if err := sb.Close(ctx); err != nil {
					b.Error(err)
				}
			})
			o := sb.Options()
			c, err := New(Config{URL: url, Realm: o.Realm, ClientID: o.ClientID, ClientSecret: o.ClientSecret,
				RefreshToken: sb.IssueRefreshToken(), Timeout: 10 * time.Second})
			if err != nil {
				b.Fatal(err)
			}
			ctx := b.Context()
			items := benchItems(benchBatch)
			// Outside the timing: the schema probe, the first token and
			// connection, and one call that proves the items are valid.
			if _, err := c.CreatePayParts(ctx, sandbox.CompanyNordlys, items); err != nil {
				b.Fatal(err)
			}
			calls, n := c.Calls(), 0
			b.ReportAllocs()
			for b.Loop() {
				created, err := c.CreatePayParts(ctx, sandbox.CompanyNordlys, items)
				if err != nil {
					b.Fatal(err)
				}
				n += len(created)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "payparts/s")

			if n != b.N*benchBatch {
				b.Fatalf("%d pay parts created in %d calls, want %d", n, b.N, b.N*benchBatch)
			}
			if got := c.Calls() - calls; got != int64(b.N) {
				b.Fatalf("%d GraphQL calls for %d iterations: something was retried", got, b.N)
			}
			held := -1
			for _, cs := range sb.State().Companies {
				if cs.ID == sandbox.CompanyNordlys {
					held = len(cs.PayParts)
				}
			}
			if held != n+benchBatch {
				b.Fatalf("the sandbox holds %d pay parts of %s, want %d", held, sandbox.CompanyNordlys, n+benchBatch)
			}
		})
	}
}
