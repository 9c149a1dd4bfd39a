package sandbox

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"
	"github.com/graph-gophers/graphql-go/introspection"
	"github.com/graph-gophers/graphql-go/trace/tracer"
)

// maxGraphQLBody bounds a /graphql request body.
const maxGraphQLBody = 4 << 20

// graphQLRequest is the JSON body of a /graphql POST.
type graphQLRequest struct {
	Query         string         `json:"query"`
	OperationName string         `json:"operationName"`
	Variables     map[string]any `json:"variables"`
}

// handleGraphQL serves /graphql: method, bearer check, body, faults,
// execution, response (gzip when asked).
func (s *Server) handleGraphQL(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeJSON(w, http.StatusMethodNotAllowed, graphQLErrors("method "+r.Method+" not allowed: use POST"))
		return
	}
	user, ok := s.auth.verify(r.Header.Get("Authorization"))
	if !ok {
		s.unauthorized(w)
		return
	}
	body, err := readAll(w, r, maxGraphQLBody)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, graphQLErrors("request body larger than "+strconv.Itoa(maxGraphQLBody)+" bytes"))
			return
		}
		writeJSON(w, http.StatusBadRequest, graphQLErrors("read request body: "+err.Error()))
		return
	}
	var req graphQLRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeJSON(w, http.StatusBadRequest, graphQLErrors("invalid request body: "+err.Error()))
		return
	}

	op := canonicalOp(rootField(req.Query, req.OperationName))
	plan := s.takeFaults(op)
	if plan.delay > 0 && !s.wait(r, plan.delay) {
		dropConnection(w) // the client left or the server is closing
		return
	}
	if plan.respond != nil && !plan.respond.Kind.afterCommit() {
		s.respondBefore(w, *plan.respond)
		return
	}

	ctx := withUser(r.Context(), user)
	ctx = context.WithValue(ctx, execHookKey{}, &execHook{reached: func(field string) {
		if op != "" {
			field = op
		}
		field = canonicalOp(field)
		s.count(func(c *Counters) { c.Requests[field]++ })
	}})
	resp := s.schema.Exec(ctx, req.Query, req.OperationName, req.Variables)
	out, err := json.Marshal(resp)
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, graphQLErrors("encode response: "+err.Error()))
		return
	}
	if plan.respond != nil && !s.respondAfter(w, r, *plan.respond) {
		return
	}
	writeBody(w, r, "application/json", out)
}

func readAll(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	var buf bytes.Buffer
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	return buf.Bytes(), err
}

// writeBody writes a 200 response, gzipped if the client accepts gzip.
func writeBody(w http.ResponseWriter, r *http.Request, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Add("Vary", "Accept-Encoding")
	if acceptsGzip(r) {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(body)
		_ = zw.Close()
		body = buf.Bytes()
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// acceptsGzip reports whether Accept-Encoding lists gzip without q=0.
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(part, ";")
			if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
				continue
			}
			q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
			if q == "q=0" || q == "q=0.0" || q == "q=0.00" || q == "q=0.000" {
				return false
			}
			return true
		}
	}
	return false
}

// writeJSON writes v as a JSON response with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encode response"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// graphQLErrors is a GraphQL-shaped error body for answers that never
// reached graph-gophers.
func graphQLErrors(msg string) any {
	return map[string]any{"errors": []map[string]string{{"message": msg}}}
}

// execHook is called once, when graph-gophers starts resolving fields:
// the request got through parsing, validation and argument coercion.
type execHook struct {
	once    sync.Once
	reached func(field string)
}

type execHookKey struct{}

// execTracer is the graph-gophers tracer that fires execHook.
type execTracer struct{}

var _ tracer.Tracer = execTracer{}

func (execTracer) TraceQuery(ctx context.Context, _ string, _ string, _ map[string]any, _ map[string]*introspection.Type) (context.Context, tracer.QueryFinishFunc) {
	return ctx, func([]*gqlerrors.QueryError) {}
}

func (execTracer) TraceField(ctx context.Context, _, _, fieldName string, _ bool, _ map[string]any) (context.Context, tracer.FieldFinishFunc) {
	if h, ok := ctx.Value(execHookKey{}).(*execHook); ok {
		h.once.Do(func() { h.reached(fieldName) })
	}
	return ctx, func(*gqlerrors.QueryError) {}
}
