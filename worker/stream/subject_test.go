package stream

import "testing"

func TestFilterTakesCompany(t *testing.T) {
	t.Parallel()
	tests := []struct {
		filter string
		want   bool
	}{
		{"", true},
		{">", true},
		{"timesheets.>", true},
		{"timesheets.MV8x.>", true},
		{" timesheets.MV8x.> ", true},
		{"timesheets.*.>", true},
		{"timesheets.*.toggl", true},
		{"timesheets.MV8x.toggl", true},
		{"*.MV8x.*", true},
		{"acme.MV8x.>", true},
		{"timesheets.MV8y.>", false},
		{"timesheets.MV8y.toggl", false},
		{"timesheets.MV8x", false},
		{"timesheets.*", false},
		{"timesheets.MV8x.toggl.more", false},
		{"timesheets.MV8.>", false},
	}
	for _, tt := range tests {
		if got := FilterTakesCompany(tt.filter, "MV8x"); got != tt.want {
			t.Errorf("FilterTakesCompany(%q, MV8x) = %v, want %v", tt.filter, got, tt.want)
		}
	}
}
