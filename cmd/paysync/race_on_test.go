//go:build race

package main

// raceEnabled: the race detector slows every test about tenfold.
const raceEnabled = true
