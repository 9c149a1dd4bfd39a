package mapping_test

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/paysync/paysync/mapping"
)

func ExampleNewReader() {
	in := "id,employee_id,date,hours,type\n" +
		"1,E1,2024-03-04,7:30,normal\n" +
		"2,E1,2024-13-01,8,normal\n" +
		"3,E2,2024-03-05,0:20:00,normal\n"
	rd, format, err := mapping.NewReader("hours.csv", strings.NewReader(in), mapping.ReadOptions{})
	if err != nil {
		fmt.Println(err) // fatal: unreadable, or required columns missing
		return
	}
	fmt.Println("format:", format)
	for {
		e, err := rd.Next()
		var p *mapping.Problem
		switch {
		case err == io.EOF:
			return
		case errors.As(err, &p):
			fmt.Println("problem:", p) // one bad row; read on
		case err != nil:
			fmt.Println(err) // fatal
			return
		default:
			fmt.Println(e.Where(), e.ID, e.Employee(), e.Date, e.Hours, e.Hours.Seconds.String()+"s")
		}
	}
	// Output:
	// format: csv
	// hours.csv:2 1 E1 2024-03-04 7.5 27000s
	// problem: hours.csv:3: entry 2: date: "2024-13-01" is not a date in the format YYYY-MM-DD (dates must be YYYY-MM-DD; set the date format (--date-format, PAYSYNC_DATE_FORMAT or the rules' read.date_format) to the one the file uses)
	// hours.csv:4 3 E2 2024-03-05 0:20:00 1200s
}
