// Package testca is the throwaway certificate authority of the e2e beds
// (e2e/system's PKI and e2e/cluster's): a P-256 CA held in memory that
// signs leaf certificates, each with a fresh P-256 key, and hands both
// out as PEM for the files and key pairs the components load. Nothing it
// makes is meant to outlive a test run.
package testca
