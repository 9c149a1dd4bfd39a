package console_test

import (
	"fmt"
	"strings"
	"testing"
	"regexp"
)

func TestZZScratch(t *testing.T) {
	e := setup(t, testPassword)
	c := e.client(t)
	e.login(t, c)
	ent := regexp.MustCompile(`touches <strong>\d+</strong> entries|<p class="notice">[^<]*</p>|<p class="result"[^<]*|entries touched[^<]*`)
	show := func(what, body string) { t.Logf("%s: holds %d: %v", what, e.holds(), ent.FindAllString(body, -1)) }
	steps := []string{}
	if len(steps) == 0 {
		for _, a := range []struct{ op, q string }{
			{"replay", fmt.Sprintf("batch=%d", e.batch)},
			{"revert", fmt.Sprintf("batch=%d", e.batch)},
			{"replay", fmt.Sprintf("batch=%d", e.batch)},
		} {
			pv := e.get(t, c, "/actions/"+a.op+"?"+a.q)
			show("preview "+a.op, pv.body)
			if !strings.Contains(pv.body, `id="confirm"`) { continue }
			r := e.post(t, c, "/actions/"+a.op, formOf(t, pv.body), nil)
			show("done "+a.op, r.body)
		}
	}
}
