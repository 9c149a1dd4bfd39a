package paysync_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paysync/paysync"
)

func TestParseFieldRule(t *testing.T) {
	tests := []struct {
		in      string
		want    paysync.FieldRule
		wantErr bool
	}{
		{"MANDATORY", paysync.RuleMandatory, false},
		{"required", paysync.RuleMandatory, false},
		{"Optional", paysync.RuleOptional, false},
		{"ALLOWED", paysync.RuleOptional, false},
		{"forbidden", paysync.RuleForbidden, false},
		{"Not_Allowed", paysync.RuleForbidden, false},
		{" OPTIONAL ", paysync.RuleOptional, false},
		{"", paysync.RuleUnknown, true},
		{"yes", paysync.RuleUnknown, true},
	}
	for _, tt := range tests {
		got, err := paysync.ParseFieldRule(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseFieldRule(%q) = %s, %v", tt.in, got, err)
		}
	}
	if paysync.FieldRuleFromBool(true) != paysync.RuleOptional || paysync.FieldRuleFromBool(false) != paysync.RuleForbidden {
		t.Error("FieldRuleFromBool: true must be optional (allowed), false forbidden")
	}
}

func TestNumbers_Equal(t *testing.T) {
	a := paysync.Numbers{Units: paysync.Dec("1.50"), Rate: paysync.Dec("200")}
	b := paysync.Numbers{Units: paysync.Dec("1.5"), Rate: paysync.Dec("200.00")}
	if !a.Equal(b) {
		t.Error("1.50 must equal 1.5")
	}
	b.Amount = paysync.Dec("300")
	if a.Equal(b) {
		t.Error("a present field must not equal an absent one")
	}
	if got := a.String(); got != "units=1.5 rate=200" {
		t.Errorf("String() = %q", got)
	}
}

// TestPackageDocs fails when a package lacks a doc comment.
func TestPackageDocs(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if path != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		pkgs, err := parser.ParseDir(token.NewFileSet(), path, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			return err
		}
		for name, p := range pkgs {
			documented := false
			for _, f := range p.Files {
				if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
					documented = true
				}
			}
			if !documented {
				t.Errorf("package %s (%s) has no doc comment", name, path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
