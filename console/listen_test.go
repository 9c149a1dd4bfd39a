package console_test

import "github.com/paysync/paysync/console"

func consoleListen(addr string) console.Listen { return console.Listen{Addr: addr} }
