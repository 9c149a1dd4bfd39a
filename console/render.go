package console

import (
	"bytes"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/shopspring/decimal"
)

// page is what every page template gets.
type page struct {
	Name     string // the template, and the nav entry it marks
	Who      who
	LoggedIn bool
	Mode     string
	Data     any
	Now      time.Time
}

var funcs = template.FuncMap{
	"num": func(d decimal.NullDecimal) string {
		if !d.Valid {
			return "–"
		}
		return d.Decimal.String()
	},
	"dec": func(d decimal.Decimal) string { return d.String() },
	"utc": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"query": func(v url.Values) string { return v.Encode() },
	"lower": strings.ToLower,
}

// parse reads one template per page: the layout and the page's file.
func (s *Server) parse() error {
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return err
	}
	s.pages = map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(path.Base(n), ".html")
		if base == "layout" {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(files, "templates/layout.html", n)
		if err != nil {
			return fmt.Errorf("console: template %s: %w", n, err)
		}
		s.pages[base] = t
	}
	return nil
}

// render writes page name with data.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, c who, data any) {
	t := s.pages[name]
	var buf bytes.Buffer
	p := page{Name: name, Who: c, LoggedIn: c.Actor != "", Mode: s.cfg.Mode, Data: data, Now: s.now()}
	if err := t.ExecuteTemplate(&buf, "layout", p); err != nil {
		s.log.Error("console: render", "page", name, "err", err)
		http.Error(w, "console: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// fail answers with an error page.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c, _ := s.caller(r)
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		c = who{} // no navigation for a refused caller
	}
	s.render(w, r, status, "error", c, errorData{Status: status, Text: http.StatusText(status), Message: msg})
}

type errorData struct {
	Status        int
	Text, Message string
}

func (s *Server) style(w http.ResponseWriter, r *http.Request) {
	b, _ := files.ReadFile("templates/style.css")
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "max-age=3600")
	w.Write(b)
}
