// Package deploy holds paysync's deployment files; its tests validate them.
package deploy
