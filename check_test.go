package paysync_test

import (
	"errors"
	"testing"

	"github.com/paysync/paysync"
)

func TestCheck_Problem(t *testing.T) {
	cause := errors.New("cause")
	tests := []struct {
		name  string
		check paysync.Check
		want  string // "" for no problem
	}{
		{"ok", paysync.Checked(paysync.CheckOK, nil, "fine"), ""},
		{"warn", paysync.Checked(paysync.CheckWarn, cause, "worth a look"), ""},
		{"fail", paysync.Checked(paysync.CheckFail, cause, "broken"), "broken"},
		{"skipped", paysync.Checked(paysync.CheckSkipped, nil, "not looked at"), "not looked at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.check.Problem()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v, want none", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Errorf("got %v, want %q", err, tt.want)
			case tt.want != "" && tt.check.Err != nil && !errors.Is(err, tt.check.Err):
				t.Errorf("%v does not wrap the cause", err)
			}
		})
	}
}
