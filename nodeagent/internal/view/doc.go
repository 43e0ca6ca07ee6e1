// Package view holds the agent's model of its node view: the resources it
// received by name, each with its version, and the system version of the
// whole. A View is immutable: With returns a new View with an Update
// applied, so a failed apply simply keeps the old value (last good state).
package view
